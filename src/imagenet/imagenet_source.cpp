#include "imagenet/imagenet_source.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "util/error.h"

namespace sg {

ImageNetSource::ImageNetSource(std::shared_ptr<const ImageIndex> index, Split split,
                               int image_size, uint64_t seed, int workers)
    : index_(std::move(index)), entries_(entries_of(*index_, split)), split_(split) {
  if (entries_.empty()) {
    throw RunError(fmt::format("{}: the {} split has no images; check the tree with `singularity "
                               "prepare imagenet`",
                               index_->root, split == Split::Train ? "train" : "val"));
  }
  options_.seed = seed;
  options_.augment.size = image_size;
  options_.augment.resize = image_size * 256 / 224;  // torchvision: resize 256, crop 224
  for (const auto& path : index_->packs) packs_.push_back(std::make_unique<ImagePackReader>(path));
  for (const ImageEntry& e : entries_) {
    if (e.shard >= static_cast<int32_t>(packs_.size())) {
      throw RunError(fmt::format("{}: refers to pack shard {} of {}", e.path, e.shard, packs_.size()));
    }
  }
  for (int t = 0; t < std::max(1, workers); ++t) workers_.emplace_back([this] { work(); });
}

ImageNetSource::~ImageNetSource() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : workers_) t.join();
}

std::shared_ptr<ImageNetSource::Pending> ImageNetSource::queue(uint64_t first, int count) {
  auto it = pending_.find({first, count});
  if (it != pending_.end()) return it->second;
  auto batch = std::make_shared<Pending>();
  batch->count = count;
  batch->images.resize(static_cast<size_t>(count) * 3 * options_.augment.size * options_.augment.size);
  batch->labels.resize(static_cast<size_t>(count));
  batch->remaining = count;
  pending_[{first, count}] = batch;
  for (int j = 0; j < count; ++j) jobs_.push_back({batch, first, j});
  work_ready_.notify_all();
  return batch;
}

void ImageNetSource::prefetch(const std::vector<uint64_t>& firsts, int count) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint64_t first : firsts) queue(first, count);
}

void ImageNetSource::fill_rows(MicroBatch& batch, int row, int count, uint64_t first) {
  std::shared_ptr<Pending> p;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    p = queue(first, count);
    batch_ready_.wait(lock, [&] { return p->remaining == 0; });
    pending_.erase({first, count});
  }
  if (p->error) std::rethrow_exception(p->error);
  std::memcpy(batch.data<float>(0) + static_cast<size_t>(row) * batch.per_sample(0),
              p->images.data(), p->images.size() * sizeof(float));
  std::memcpy(batch.data<int32_t>(1) + row, p->labels.data(), p->labels.size() * sizeof(int32_t));
}

void ImageNetSource::compute(Pending& batch, uint64_t sample_number, int j, JpegDecoder& decoder,
                             RgbImage& scratch, std::vector<uint8_t>& bytes) {
  const auto n = static_cast<uint64_t>(entries_.size());
  int64_t epoch = 0, image = 0;
  if (split_ == Split::Train) {
    epoch = static_cast<int64_t>(sample_number / n);
    std::shared_ptr<const std::vector<uint32_t>> order;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = orders_.find(epoch);
      if (it != orders_.end()) order = it->second;
    }
    if (!order) {  // shuffled outside the lock (1.28M entries): the other workers go on
      order = std::make_shared<const std::vector<uint32_t>>(
          epoch_order(options_.seed, epoch, entries_.size()));
      std::lock_guard<std::mutex> lock(mutex_);
      orders_.emplace(epoch, order);  // a worker that shuffled it too computed the same order
      while (orders_.size() > 3) orders_.erase(orders_.begin());  // shared_ptr keeps ours
    }
    image = (*order)[sample_number % n];
  } else {
    image = static_cast<int64_t>(sample_number % n);
  }
  const ImageEntry& e = entries_[static_cast<size_t>(image)];
  const size_t side = static_cast<size_t>(options_.augment.size);
  std::string why;
  if (!load_sample(batch.images.data() + static_cast<size_t>(j) * 3 * side * side, e, packs_,
                   split_, options_.seed, epoch, image, options_, decoder, scratch, bytes, &why)) {
    failures_.fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex_);
    if (logged_.emplace(e.path, true).second) {
      std::fprintf(stderr, "warning: imagenet: %s: undecodable (%s); it trains as a zero image\n",
                   e.path.c_str(), why.c_str());
    }
  }
  batch.labels[static_cast<size_t>(j)] = e.label;
}

void ImageNetSource::work() {
  JpegDecoder decoder;
  RgbImage scratch;
  std::vector<uint8_t> bytes;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      compute(*job.batch, job.first + static_cast<uint64_t>(job.j), job.j, decoder, scratch, bytes);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !job.batch->error) job.batch->error = error;
    if (--job.batch->remaining == 0) batch_ready_.notify_all();
  }
}

}  // namespace sg
