#pragma once
// Batches of decoded, augmented, normalised images for training and evaluation.
//
// Everything a batch holds is a pure function of (index, split, options): the order of an epoch
// is a permutation seeded by (seed, epoch), and each sample's crop and flip are seeded by
// (seed, epoch, sample index). Worker threads only decide when a sample is computed, never what
// it is, so the output is the same for any thread count, and a run resumes exactly from the
// (epoch, position) a checkpoint saved.
//
// An undecodable image (truncated, not a JPEG) is logged once to stderr and counted; its slot in
// the batch is all zeros (after normalisation: the mean colour), keeps its label, and has
// ok[i] = 0 so a trainer can leave it out of the loss. The batch keeps its shape and the order
// stays deterministic, which substituting another sample would not give.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagenet/image_index.h"
#include "imagenet/image_transform.h"

namespace sg {

struct LoaderOptions {
  int batch_size = 32;
  uint64_t seed = 0;
  int threads = 0;           // decoding threads; 0 decodes inside next()
  int prefetch_batches = 2;  // batches computed ahead of the consumer (with threads > 0)
  bool shuffle = true;       // Split::Train only; Split::Val always runs in index order
  bool drop_last = false;    // leave out an epoch's last, partial batch
  bool loop = false;         // run on into the next epochs instead of ending after one
  int64_t epoch = 0;         // where to start: what position() returned when the run was saved
  int64_t position = 0;
  bool dct_scaling = true;   // decode large images at a DCT-domain reduced size (see jpeg_decoder.h)
  AugmentOptions augment;
};

struct ImageBatch {
  int n = 0;                          // samples in this batch (the last of an epoch may be short)
  int size = 224;                     // image side
  std::vector<float> images;          // (n, 3, size, size), normalised
  std::vector<int32_t> labels;        // (n)
  std::vector<uint8_t> ok;            // (n) 0 where the image could not be decoded (zeros)
  std::vector<int64_t> samples;       // (n) index of each sample in the split's entries
  int64_t epoch = 0, position = 0;    // epoch and in-epoch position of the first sample
};

// The order of the n samples in an epoch: a Fisher-Yates shuffle driven by (seed, epoch).
std::vector<uint32_t> epoch_order(uint64_t seed, int64_t epoch, size_t n);

// Decodes one JPEG and applies the split's transform into out (3, size, size). false when the
// bytes do not decode (out is then zeros and *why, when not null, says why).
bool decode_and_transform(float* out, const uint8_t* jpeg, size_t size, Split split, uint64_t seed, int64_t epoch,
                          int64_t sample_index, const LoaderOptions& options, JpegDecoder& decoder,
                          RgbImage& scratch, std::string* why);

class ImagePackReader;

// One sample of the split: its JPEG read (from its pack shard or its file) and transformed into
// out (3, size, size). false when it cannot be read or decoded (out is then zeros, *why says
// why). Thread-safe with one decoder, scratch and bytes buffer per thread.
bool load_sample(float* out, const ImageEntry& entry,
                 const std::vector<std::unique_ptr<ImagePackReader>>& packs, Split split,
                 uint64_t seed, int64_t epoch, int64_t sample, const LoaderOptions& options,
                 JpegDecoder& decoder, RgbImage& scratch, std::vector<uint8_t>& bytes,
                 std::string* why);

class ImageBatchLoader {
 public:
  // Throws sg::SpecError for options that cannot work (batch_size < 1, a start position past
  // the split) and sg::RunError for an empty split or an unreadable pack.
  ImageBatchLoader(const ImageIndex& index, Split split, LoaderOptions options);
  ~ImageBatchLoader();
  ImageBatchLoader(const ImageBatchLoader&) = delete;
  ImageBatchLoader& operator=(const ImageBatchLoader&) = delete;

  // The next batch (buffers are swapped in, so reuse one ImageBatch); false after the last
  // batch of the epoch when options.loop is false.
  bool next(ImageBatch& batch);

  // Where the batch after the last one returned starts: save these to resume.
  int64_t epoch() const { return resume_epoch_; }
  int64_t position() const { return resume_position_; }
  int64_t undecodable() const;  // samples that failed to decode so far
  int64_t batches_per_epoch() const;

  struct State;  // shared with the worker threads (defined in the .cpp)

 private:
  std::unique_ptr<State> state_;
  int64_t resume_epoch_ = 0, resume_position_ = 0;
};

}  // namespace sg
