#include "imagenet/image_batch_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "data/file_io.h"
#include "imagenet/image_pack.h"
#include "util/error.h"

namespace sg {

std::vector<uint32_t> epoch_order(uint64_t seed, int64_t epoch, size_t n) {
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  uint64_t state = mix64(mix64(seed ^ 0x5EEDULL) + static_cast<uint64_t>(epoch));
  for (size_t i = n; i > 1; --i) {
    state += 0x9E3779B97F4A7C15ULL;
    // Multiply-shift maps 64 random bits onto [0, i) without a division.
    const auto j = static_cast<size_t>((static_cast<unsigned __int128>(mix64(state)) * i) >> 64);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

bool decode_and_transform(float* out, const uint8_t* jpeg, size_t size, Split split, uint64_t seed, int64_t epoch,
                          int64_t sample_index, const LoaderOptions& options, JpegDecoder& decoder,
                          RgbImage& scratch, std::string* why) {
  const int side = options.augment.size;
  JpegHeader header;
  bool ok = decoder.read_header(jpeg, size, header);
  CropBox box;
  if (ok) {
    box = split == Split::Train
              ? random_resized_crop_box(header.width, header.height, seed, epoch, sample_index, options.augment)
              : center_crop_box(header.width, header.height, options.augment);
    int num = 1, den = 1;
    if (options.dct_scaling) {
      int min_w = 0, min_h = 0;
      min_decode_size(box, header.width, header.height, side, min_w, min_h);
      choose_dct_scale(header.width, header.height, min_w, min_h, num, den);
    }
    const int w = dct_scaled(header.width, den), h = dct_scaled(header.height, den);
    box = scale_box(box, header.width, header.height, w, h);
    // Only the window the resampler reads is decoded: the same pixels there, less work.
    int x0 = 0, y0 = 0, x1 = w, y1 = h;
    resample_window(box, w, h, side, x0, y0, x1, y1);
    ok = decoder.decode_window(jpeg, size, den, x0, y0, x1, y1, scratch);
  }
  if (!ok) {
    if (why != nullptr) *why = decoder.last_error();
    std::fill(out, out + 3 * static_cast<size_t>(side) * side, 0.0f);
    return false;
  }
  resample_normalize(out, scratch, box, side);
  return true;
}

bool load_sample(float* out, const ImageEntry& e,
                 const std::vector<std::unique_ptr<ImagePackReader>>& packs, Split split,
                 uint64_t seed, int64_t epoch, int64_t sample, const LoaderOptions& options,
                 JpegDecoder& decoder, RgbImage& scratch, std::vector<uint8_t>& bytes,
                 std::string* why) {
  const int side = options.augment.size;
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string error;
  bool readable = true;
  if (e.shard >= 0) {
    auto r = packs[static_cast<size_t>(e.shard)]->range(e.offset, e.size);
    data = r.first;
    size = r.second;
  } else if (read_regular_file(e.path, bytes, error)) {  // a FIFO would block fopen forever
    data = bytes.data();
    size = bytes.size();
  } else {
    readable = false;  // a directory named .JPEG, a FIFO, a vanished file: `error` says which
  }
  if (!readable) {
    if (why != nullptr) *why = error;
    std::fill(out, out + 3 * static_cast<size_t>(side) * side, 0.0f);
    return false;
  }
  return decode_and_transform(out, data, size, split, seed, epoch, sample, options, decoder,
                              scratch, why);
}

namespace {

struct BatchSpan {
  int64_t epoch = 0, start = 0;
  int count = 0;
};

struct Slot {
  int64_t batch = -1;  // which batch the slot holds or is filling
  int remaining = 0;   // samples still being computed
  ImageBatch data;
};

}  // namespace

struct ImageBatchLoader::State {
  const std::vector<ImageEntry>* entries = nullptr;
  Split split = Split::Train;
  LoaderOptions options;
  std::vector<std::unique_ptr<ImagePackReader>> packs;
  int64_t first_epoch_batches = 0, epoch_batches = 0, total_batches = 0;

  std::mutex mutex;
  std::condition_variable work_ready, batch_ready;
  bool stop = false;
  int64_t next_batch = 0, consumed = 0;
  int next_sample = 0;
  std::vector<Slot> slots;
  std::map<int64_t, std::shared_ptr<const std::vector<uint32_t>>> orders;
  std::set<std::string> logged;
  std::atomic<int64_t> failures{0};
  std::vector<std::thread> workers;

  int64_t n() const { return static_cast<int64_t>(entries->size()); }

  BatchSpan span_of(int64_t k) const {
    const int64_t b = options.batch_size;
    BatchSpan s;
    if (k < first_epoch_batches) {
      s.epoch = options.epoch;
      s.start = options.position + k * b;
    } else {
      const int64_t rest = k - first_epoch_batches;
      s.epoch = options.epoch + 1 + rest / epoch_batches;
      s.start = (rest % epoch_batches) * b;
    }
    s.count = static_cast<int>(std::min(b, n() - s.start));
    return s;
  }

  // Under the mutex.
  std::shared_ptr<const std::vector<uint32_t>> order_of(int64_t epoch) {
    auto it = orders.find(epoch);
    if (it != orders.end()) return it->second;
    auto order = std::make_shared<const std::vector<uint32_t>>(
        split == Split::Train && options.shuffle ? epoch_order(options.seed, epoch, entries->size())
                                                 : std::vector<uint32_t>());
    if (orders.size() >= 3) orders.erase(orders.begin());
    orders[epoch] = order;
    return order;
  }

  // Computes one sample into its place in `batch`; thread-safe.
  void compute(ImageBatch& batch, int j, int64_t sample, int64_t epoch, JpegDecoder& decoder, RgbImage& scratch,
               std::vector<uint8_t>& bytes) {
    const ImageEntry& e = (*entries)[sample];
    const int side = options.augment.size;
    float* out = batch.images.data() + static_cast<size_t>(j) * 3 * side * side;
    std::string why;
    const bool ok = load_sample(out, e, packs, split, options.seed, epoch, sample, options, decoder,
                                scratch, bytes, &why);
    if (!ok) {
      failures.fetch_add(1);
      std::lock_guard<std::mutex> lock(mutex);
      if (logged.insert(e.path).second)
        std::fprintf(stderr, "imagenet: %s: undecodable (%s); the sample is a zero image with ok = 0\n",
                     e.path.c_str(), why.c_str());
    }
    batch.labels[j] = e.label;
    batch.ok[j] = ok ? 1 : 0;
    batch.samples[j] = sample;
  }

  void prepare(ImageBatch& batch, const BatchSpan& s) const {
    const int side = options.augment.size;
    batch.n = s.count;
    batch.size = side;
    batch.images.resize(static_cast<size_t>(s.count) * 3 * side * side);
    batch.labels.resize(s.count);
    batch.ok.resize(s.count);
    batch.samples.resize(s.count);
    batch.epoch = s.epoch;
    batch.position = s.start;
  }

  int64_t sample_at(const std::vector<uint32_t>& order, int64_t position) const {
    return order.empty() ? position : order[position];
  }

  void work() {
    JpegDecoder decoder;
    RgbImage scratch;
    std::vector<uint8_t> bytes;
    const int64_t window = options.prefetch_batches;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      work_ready.wait(lock, [&] { return stop || (next_batch < total_batches && next_batch < consumed + window); });
      if (stop) return;
      const int64_t k = next_batch;
      const int j = next_sample;
      const BatchSpan s = span_of(k);
      Slot& slot = slots[k % window];
      if (j == 0) {
        slot.batch = k;
        slot.remaining = s.count;
        prepare(slot.data, s);
      }
      if (++next_sample == s.count) {
        ++next_batch;
        next_sample = 0;
      }
      auto order = order_of(s.epoch);
      lock.unlock();
      compute(slot.data, j, sample_at(*order, s.start + j), s.epoch, decoder, scratch, bytes);
      lock.lock();
      if (--slot.remaining == 0) batch_ready.notify_all();
    }
  }
};

ImageBatchLoader::ImageBatchLoader(const ImageIndex& index, Split split, LoaderOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.entries = &entries_of(index, split);
  s.split = split;
  s.options = options;
  const char* name = split == Split::Train ? "train" : "val";
  if (options.batch_size < 1) throw SpecError(fmt::format("imagenet loader: batch_size {} must be >= 1", options.batch_size));
  if (options.threads < 0 || options.prefetch_batches < 1)
    throw SpecError("imagenet loader: threads must be >= 0 and prefetch_batches >= 1");
  if (s.entries->empty())
    throw RunError(fmt::format("{}: the {} split has no images; check the tree with `singularity prepare imagenet`",
                               index.root, name));
  const int64_t n = s.n(), b = options.batch_size;
  if (options.epoch < 0 || options.position < 0 || options.position > n)
    throw SpecError(fmt::format("imagenet loader: resume position {} (epoch {}) is outside the {} split of {} images",
                                options.position, options.epoch, name, n));
  s.epoch_batches = options.drop_last ? n / b : (n + b - 1) / b;
  if (s.epoch_batches == 0)
    throw SpecError(fmt::format("imagenet loader: batch_size {} with drop_last leaves no batch of the {} {} images",
                                b, n, name));
  const int64_t rest = n - options.position;
  s.first_epoch_batches = options.drop_last ? rest / b : (rest + b - 1) / b;
  s.total_batches = options.loop ? std::numeric_limits<int64_t>::max() : s.first_epoch_batches;
  resume_epoch_ = options.epoch;
  resume_position_ = options.position;
  for (const auto& path : index.packs) s.packs.push_back(std::make_unique<ImagePackReader>(path));
  for (const auto& e : *s.entries)
    if (e.shard >= static_cast<int64_t>(s.packs.size()))
      throw RunError(fmt::format("{}: refers to pack shard {} of {}", e.path, e.shard, s.packs.size()));
  if (options.threads > 0) {
    s.slots.resize(options.prefetch_batches);
    for (int t = 0; t < options.threads; ++t) s.workers.emplace_back([&s] { s.work(); });
  }
}

ImageBatchLoader::~ImageBatchLoader() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->work_ready.notify_all();
  for (auto& t : state_->workers) t.join();
}

bool ImageBatchLoader::next(ImageBatch& batch) {
  State& s = *state_;
  const int64_t k = s.consumed;
  if (k >= s.total_batches) return false;
  const BatchSpan span = s.span_of(k);
  if (s.workers.empty()) {
    thread_local JpegDecoder decoder;
    thread_local RgbImage scratch;
    thread_local std::vector<uint8_t> bytes;
    std::shared_ptr<const std::vector<uint32_t>> order;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      order = s.order_of(span.epoch);
    }
    s.prepare(batch, span);
    for (int j = 0; j < span.count; ++j)
      s.compute(batch, j, s.sample_at(*order, span.start + j), span.epoch, decoder, scratch, bytes);
    ++s.consumed;
  } else {
    std::unique_lock<std::mutex> lock(s.mutex);
    Slot& slot = s.slots[k % s.options.prefetch_batches];
    s.batch_ready.wait(lock, [&] { return slot.batch == k && slot.remaining == 0; });
    std::swap(batch, slot.data);
    ++s.consumed;
    lock.unlock();
    s.work_ready.notify_all();
  }
  const int64_t end = span.start + span.count;
  const bool epoch_done = end >= s.n() || (s.options.drop_last && s.n() - end < s.options.batch_size);
  resume_epoch_ = epoch_done ? span.epoch + 1 : span.epoch;
  resume_position_ = epoch_done ? 0 : end;
  return true;
}

int64_t ImageBatchLoader::undecodable() const { return state_->failures.load(); }

int64_t ImageBatchLoader::batches_per_epoch() const { return state_->epoch_batches; }

}  // namespace sg
