#include "train/tensorboard_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace sg {
namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire format: a key is (field << 3) | wire type; integers are little-endian.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, field << 3 | type);
}

template <typename Word>
void put_little_endian(std::string& out, Word word) {
  for (size_t i = 0; i < sizeof(Word); ++i) out += static_cast<char>((word >> (8 * i)) & 0xff);
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  put_key(out, field, kFixed64);
  put_little_endian(out, bits);
}

void put_float(std::string& out, uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  put_key(out, field, kFixed32);
  put_little_endian(out, bits);
}

void put_int64(std::string& out, uint32_t field, int64_t value) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(value));  // int64: negatives take ten bytes
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event's fields (event.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
                   kEventSessionLog = 7;
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
constexpr uint32_t kSessionLogStatus = 1, kSessionLogStart = 1;

std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  if (step != 0) put_int64(event, kEventStep, step);  // proto3: a zero is left out
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : data) crc = kCrc32cTable[(crc ^ static_cast<uint8_t>(c)) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view data) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  put_little_endian(record, masked_crc32c(length));
  record += data;
  put_little_endian(record, masked_crc32c(data));
  return record;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_key(session_log, kSessionLogStatus, kVarint);
  put_varint(session_log, kSessionLogStart);
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSessionLog, session_log);
  return event;
}

std::string scalars_event(double wall_time, int64_t step, const ScalarValues& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string summary_value;
    put_bytes(summary_value, kValueTag, tag);
    put_float(summary_value, kValueSimpleValue, static_cast<float>(value));
    put_bytes(summary, kSummaryValue, summary_value);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int64_t first_step) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(dir, error);
  const double start = now_seconds();
  const std::string base =
      fmt::format("{}/events.out.tfevents.{}.{}", dir, static_cast<int64_t>(start), host_name());
  // Two starts within a second (a quick resume) get distinct files, later ones sorting after.
  path_ = base;
  for (int n = 1; fs::exists(path_); ++n) path_ = fmt::format("{}.{}", base, n);
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw RunError(path_ +
                   ": cannot create the TensorBoard event file; check that log.dir is "
                   "writable (or set log.tensorboard: false)");
  }
  write_record(file_version_event(start));
  write_record(session_start_event(start, first_step));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write_scalars(int64_t step, const ScalarValues& values) {
  write_record(scalars_event(now_seconds(), step, values));
}

void TensorBoardWriter::write_record(const std::string& event) {
  const std::string record = tfrecord_frame(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0) {
    throw RunError(path_ + ": cannot write; check the disk space");
  }
}

}  // namespace sg
