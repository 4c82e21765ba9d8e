#include "backend/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sg {
namespace {

struct Totals {
  std::mutex mutex;
  std::map<std::string, std::pair<long, double>> by_name;  // calls, seconds
  std::string source = "wall-clock time per op";
  ~Totals() {
    if (by_name.empty()) return;
    std::vector<std::pair<std::string, std::pair<long, double>>> rows(by_name.begin(), by_name.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    double total = 0;
    for (const auto& r : rows) total += r.second.second;
    std::fprintf(stderr, "%s\n", source.c_str());
    std::fprintf(stderr, "%-36s %10s %10s %7s\n", "op", "calls", "seconds", "share");
    for (const auto& [name, v] : rows) {
      std::fprintf(stderr, "%-36s %10ld %10.3f %6.1f%%\n", name.c_str(), v.first, v.second,
                   100.0 * v.second / total);
    }
    std::fprintf(stderr, "%-36s %10s %10.3f\n", "all ops", "", total);
  }
};

Totals& totals() {
  static Totals t;
  return t;
}

// The flushes run at exit before the table is printed: made after the totals, so destroyed
// before them (statics are destroyed in the reverse order of their construction).
struct Flushes {
  std::mutex mutex;
  std::vector<std::function<void()>> list;
  ~Flushes() {
    for (const auto& flush : list) flush();
  }
};

Flushes& flushes() {
  totals();
  static Flushes f;
  return f;
}

}  // namespace

bool op_profiling_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SINGULARITY_PROFILE_OPS");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return enabled;
}

void set_op_time_source(const std::string& description) {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.source = description;
}

void add_op_profile_flush(std::function<void()> flush) {
  Flushes& f = flushes();
  std::lock_guard<std::mutex> lock(f.mutex);
  f.list.push_back(std::move(flush));
}

void record_op_time(const char* name, double seconds) {
  Totals& t = totals();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto& entry = t.by_name[name];
  ++entry.first;
  entry.second += seconds;
}

}  // namespace sg
