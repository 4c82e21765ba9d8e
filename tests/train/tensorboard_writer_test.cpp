// TensorBoard event files (train/tensorboard_writer.h): CRC-32C against published check values,
// TFRecord framing, the hand-encoded Event bytes, and MetricsLog writing one record per line.
#include "train/tensorboard_writer.h"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "temp_dir.h"
#include "train/metrics_log.h"

namespace sg {
namespace {

uint64_t little_endian(std::string_view bytes, size_t at, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i)
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return value;
}

// The records of a TFRecord stream, each checked against its framing.
std::vector<std::string> read_records(const std::string& stream) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < stream.size()) {
    REQUIRE(at + 12 <= stream.size());
    const uint64_t length = little_endian(stream, at, 8);
    CHECK(little_endian(stream, at + 8, 4) ==
          masked_crc32c(std::string_view(stream).substr(at, 8)));
    REQUIRE(at + 16 + length <= stream.size());
    const std::string data = stream.substr(at + 12, length);
    CHECK(little_endian(stream, at + 12 + length, 4) == masked_crc32c(data));
    records.push_back(data);
    at += 16 + length;
  }
  return records;
}

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out += static_cast<char>(v);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("crc32c matches the published check values") {
  CHECK(crc32c("123456789") == 0xE3069283u);  // the CRC catalogue's check value
  CHECK(crc32c("") == 0u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  CHECK(crc32c(ascending) == 0x46DD794Eu);  // RFC 3720 B.4: 0x00..0x1f
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);
  CHECK(masked_crc32c("") == 0xA282EAD8u);
}

TEST_CASE("a TFRecord is length, its masked CRC, the data and the data's masked CRC") {
  const std::string record = tfrecord_frame("abc");
  REQUIRE(record.size() == 3 + 16);
  CHECK(record.substr(0, 8) == bytes_of({3, 0, 0, 0, 0, 0, 0, 0}));
  CHECK(little_endian(record, 8, 4) == masked_crc32c(record.substr(0, 8)));
  CHECK(record.substr(12, 3) == "abc");
  CHECK(little_endian(record, 15, 4) == masked_crc32c("abc"));
  const std::string empty = tfrecord_frame("");
  CHECK(empty.size() == 16);
  CHECK(little_endian(empty, 8, 4) == 0x07980329u);  // masked crc32c of eight zero bytes
  CHECK(little_endian(empty, 12, 4) == 0xA282EAD8u);
}

TEST_CASE("events are encoded as event.proto says") {
  // wall_time 1.5 (field 1, fixed64), file_version (field 3, length-delimited).
  CHECK(file_version_event(1.5) ==
        bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}) + bytes_of({0x1a, 13}) + "brain.Event:2");
  // step 300 (field 2, varint 0xac 0x02), session_log (field 7) {status (1): START (1)}.
  CHECK(session_start_event(0, 300) ==
        bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0xac, 0x02, 0x3a, 2, 0x08, 1}));
  // summary (field 5) {value (1) {tag (1): "lr", simple_value (2, fixed32): 0.5f}}.
  CHECK(scalars_event(0, 1, {{"lr", 0.5}}) ==
        bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 1, 0x2a, 11, 0x0a, 9, 0x0a, 2}) + "lr" +
            bytes_of({0x15, 0, 0, 0, 0x3f}));
  // Two values are two repeated Value fields of one Summary.
  const std::string two = scalars_event(0, 7, {{"a", 1.0}, {"b", 2.0}});
  CHECK(two.size() == 9 + 2 + 2 + 2 * (2 + 3 + 5));
}

TEST_CASE("MetricsLog with tensorboard writes one flushed event per metrics line") {
  test::TempDir dir;
  {
    MetricsLog log(dir.path(), 0, 2, "tokens", /*tensorboard=*/true);
    StepMetrics m;
    m.step = 1;
    m.loss = 2.5f;
    m.lr = 1e-3f;
    log.log_step(m, false);
    log.log_eval(1, 2.25f, -1, {{"val_top1", 0.5}});
    // Flushed as written: a crash now loses nothing.
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "tb"))
      files.push_back(entry.path());
    REQUIRE(files.size() == 1);
    CHECK(files[0].filename().string().rfind("events.out.tfevents.", 0) == 0);
    const auto records = read_records(read_file(files[0].string()));
    REQUIRE(records.size() == 4);  // file version, session start, the step, the evaluation
    CHECK(records[0].find("brain.Event:2") != std::string::npos);
    CHECK(records[2].find("grad_norm") != std::string::npos);
    CHECK(records[2].find("tokens_per_s") != std::string::npos);
    CHECK(records[2].find("peak_mem_bytes") != std::string::npos);
    CHECK(records[3].find("val_loss") != std::string::npos);
    CHECK(records[3].find("val_top1") != std::string::npos);
  }
  // A resumed run appends a new file rather than touching the old one.
  MetricsLog resumed(dir.path(), 1, 2, "tokens", true);
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "tb"))
    count += !entry.is_directory();
  CHECK(count == 2);
}

}  // namespace sg
