#include "backend/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// The per-call trace (SINGULARITY_PROFILE_OPS_TRACE), written at exit.
struct Trace {
  struct Call {
    std::string name;
    std::chrono::steady_clock::time_point start;
    double seconds;
  };
  std::mutex mutex;
  std::string path;
  std::vector<Call> calls;
  Trace() {
    const char* v = std::getenv("SINGULARITY_PROFILE_OPS_TRACE");
    if (v != nullptr) path = v;
    // Several processes (mpirun sets these in each): one file per rank, <path>.rank<N>.
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!path.empty() && size != nullptr && rank != nullptr && std::atoi(size) > 1) {
      path += std::string(".rank") + rank;
    }
    if (!path.empty()) calls.reserve(1 << 16);
  }
  ~Trace() {
    if (path.empty() || calls.empty()) return;
    std::ofstream out(path);
    if (!out) {
      std::fprintf(stderr, "op trace: cannot write %s\n", path.c_str());
      return;
    }
    const auto origin = calls.front().start;
    char line[64];
    for (const Call& c : calls) {
      std::snprintf(line, sizeof line, "\t%.9f\t%.9f\n",
                    std::chrono::duration<double>(c.start - origin).count(), c.seconds);
      out << c.name << line;
    }
  }
};

Trace& trace() {
  static Trace t;
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

bool op_trace_enabled() {
  static const bool enabled = !trace().path.empty();
  return enabled;
}

bool op_profiling_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SINGULARITY_PROFILE_OPS");
    return (v != nullptr && v[0] != '\0' && v[0] != '0') || op_trace_enabled();
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

void record_op_call(const char* name, std::chrono::steady_clock::time_point start, double seconds) {
  record_op_time(name, seconds);
  if (!op_trace_enabled()) return;
  Trace& t = trace();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.calls.push_back({name, start, seconds});
}

}  // namespace sg
