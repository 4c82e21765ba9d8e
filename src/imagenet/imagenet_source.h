#pragma once
// ImageNet as a training or validation batch source (data/batch_source.h): micro-batches of
// (images (B, 3, S, S) float, normalised; labels (B) int32).
//
// Sample i of the training source is image order(epoch)[i % N] of epoch i / N, with order a
// Fisher-Yates shuffle seeded by (seed, epoch) and the crop and flip seeded by (seed, epoch,
// image): a pure function of i, whichever process or virtual replica asks, so a job gives the
// same batches on any process count and resumes exactly from one counter. The validation
// source is the split in index order, centre-cropped.
//
// Decoding runs on worker threads: prefetch() queues the micro-batches a step will ask for and
// the workers decode them while the step computes; fill() waits for its batch (queueing it
// first when it was never prefetched). An undecodable image is a zero image that keeps its
// label, logged once and counted in failures(); any other failure of a worker (a pack whose
// table does not match the index, say) is rethrown by the fill that waits for that batch.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <utility>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch_source.h"
#include "imagenet/image_batch_loader.h"
#include "imagenet/image_pack.h"

namespace sg {

class ImageNetSource final : public BatchSource {
 public:
  // index: shared between the splits; workers: decoding threads (>= 1).
  ImageNetSource(std::shared_ptr<const ImageIndex> index, Split split, int image_size,
                 uint64_t seed, int workers);
  ~ImageNetSource() override;
  ImageNetSource(const ImageNetSource&) = delete;
  ImageNetSource& operator=(const ImageNetSource&) = delete;

  void fill_rows(MicroBatch& batch, int row, int count, uint64_t first) override;
  void prefetch(const std::vector<uint64_t>& firsts, int count) override;
  int64_t failures() const override { return failures_.load(); }

 private:
  struct Pending {
    int count = 0;
    std::vector<float> images;
    std::vector<int32_t> labels;
    int remaining = 0;
    std::exception_ptr error;  // the first failure of a worker on this batch
  };
  struct Job {
    std::shared_ptr<Pending> batch;
    uint64_t first;
    int j;
  };
  // Under the mutex: the batch of samples [first, first + count), queued if new.
  std::shared_ptr<Pending> queue(uint64_t first, int count);
  void compute(Pending& batch, uint64_t sample_number, int j, JpegDecoder& decoder,
               RgbImage& scratch, std::vector<uint8_t>& bytes);
  void work();

  std::shared_ptr<const ImageIndex> index_;
  const std::vector<ImageEntry>& entries_;
  Split split_;
  LoaderOptions options_;
  std::vector<std::unique_ptr<ImagePackReader>> packs_;

  std::mutex mutex_;
  std::condition_variable work_ready_, batch_ready_;
  bool stop_ = false;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<Pending>> pending_;  // by (first, count)
  std::deque<Job> jobs_;
  std::map<int64_t, std::shared_ptr<const std::vector<uint32_t>>> orders_;
  std::atomic<int64_t> failures_{0};
  std::map<std::string, bool> logged_;
  std::vector<std::thread> workers_;
};

}  // namespace sg
