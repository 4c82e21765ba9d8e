#pragma once
// TensorBoard event files, written without TensorFlow or protobuf: a TFRecord stream of
// hand-encoded `Event` protos (tensorboard/compat/proto/event.proto).
//
// A TFRecord is   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// (little-endian). The first record of a file is Event{wall_time, file_version: "brain.Event:2"};
// each metrics.jsonl line becomes one Event{wall_time, step, summary: Summary{value: [Value{tag,
// simple_value}...]}}.
//
// Every process start writes a new file (events.out.tfevents.<unix seconds>.<hostname>) holding,
// after the file version, an Event{step: first_step, session_log: SessionLog{status: START}}.
// TensorBoard's loader merges a directory's files in name order and, on a START, drops the data
// it holds at steps >= that step: a run resumed from step N (first_step N + 1) supersedes what a
// run that died past its checkpoint wrote after N, as metrics.jsonl does; a fresh run (first
// step 0) supersedes everything before it.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sg {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses it.
uint32_t crc32c(std::string_view data);
// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view data);
// One TFRecord: the framing above around `data`.
std::string tfrecord_frame(std::string_view data);

using ScalarValues = std::vector<std::pair<std::string, double>>;  // tag -> value

// Serialized Event protos.
std::string file_version_event(double wall_time);
std::string session_start_event(double wall_time, int64_t step);
// Each value is stored as a float32 simple_value (non-finite values stay NaN or Inf).
std::string scalars_event(double wall_time, int64_t step, const ScalarValues& values);

class TensorBoardWriter {
 public:
  // Creates <dir> and a new event file in it, and writes the file version and a session START
  // at first_step (see above). RunError naming the file when it cannot.
  TensorBoardWriter(const std::string& dir, int64_t first_step);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event at the current wall time, flushed so a crash loses nothing written.
  void write_scalars(int64_t step, const ScalarValues& values);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace sg
