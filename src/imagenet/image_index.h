#pragma once
// The ImageNet (ILSVRC-2012) index: which files exist, and their labels.
//
// Layout read by scan_imagenet(root):
//   root/train/<wnid>/*.JPEG
//   root/val/<wnid>/*.JPEG                       (val in class folders), or
//   root/val/*.JPEG + a labels file              (flat val):
//     LOC_val_solution.csv (Kaggle: ImageId,PredictionString; first token = wnid), or
//     imagenet_2012_validation_synset_labels.txt (one wnid per line, in file-name order).
//   The devkit's ILSVRC2012_validation_ground_truth.txt holds ILSVRC2012_IDs whose id -> wnid map
//   lives only in the devkit's meta.mat (MATLAB); it is reported, not read.
//   The Kaggle tree (root/ILSVRC/Data/CLS-LOC/{train,val}, label files at root) is found too.
//
// Classes: when root holds LOC_synset_mapping.txt or imagenet_class_index.json, the class list is
// that file's 1000 wnids (sorted, = the standard label order), so a subset of the classes keeps
// the standard labels; otherwise the sorted train folder names. Labels index `wnids`.
#include <cstdint>
#include <string>
#include <vector>

namespace sg {

struct ImageEntry {
  std::string path;   // absolute, or relative to the index's root when loaded from a pack index
  int32_t label = 0;  // index into ImageIndex::wnids
  // Set when the image lives in a pack shard (see image_pack.h): shard index into
  // ImageIndex::packs, and the JPEG's byte range there. shard < 0: read `path`.
  int32_t shard = -1;
  uint64_t offset = 0;
  uint32_t size = 0;
};

struct ImageIndex {
  std::string root;                      // the scanned directory
  std::vector<std::string> wnids;        // sorted; label i = wnids[i]
  std::vector<std::string> class_names;  // same length; wnid when no mapping file was found
  std::vector<ImageEntry> train, val;    // train sorted by (label, path), val by path
  std::vector<std::string> packs;        // pack shard files, when the images were packed
};

enum class Split { Train, Val };

const std::vector<ImageEntry>& entries_of(const ImageIndex& index, Split split);

// Scans the tree. Problems that leave a usable index (a non-JPEG file, a FIFO or folder named
// .JPEG, an empty class folder, a class missing from train, a val image without a label) are
// appended to *problems (when not null), one line each naming the file; a root without train/
// and val/ throws sg::RunError.
ImageIndex scan_imagenet(const std::string& root, std::vector<std::string>* problems);

// A flat folder of JPEGs named like ImageNet's training files, <wnid>_<anything>.JPEG (the
// sample images in shared/data/imagenet/sample): every image is labelled by its wnid and serves
// as both train and val. Classes come from LOC_synset_mapping.txt or imagenet_class_index.json
// in the folder or its parent (the standard labels), else the wnids present. RunError when no
// such image is there. An image-named entry that is not a regular file (a FIFO, a folder) is
// skipped and noted in *problems (when not null).
ImageIndex scan_flat_images(const std::string& dir, std::vector<std::string>* problems = nullptr);

// The index a job's data.root names: an imagenet_index.json (or a directory holding one, as
// `prepare imagenet` writes), an ILSVRC-2012 tree, or a flat folder (scan_flat_images). Problems
// that leave a usable index go to *problems.
ImageIndex open_image_index(const std::string& root, std::vector<std::string>* problems);

// JSON: {"format": "singularity-imagenet-index", "version": 1, root, wnids, class_names, packs,
// train: {paths, labels[, shards, offsets, sizes]}, val: {...}}. Paths under root are stored
// relative to it. Throws sg::RunError naming the file on I/O or format errors.
void save_image_index(const ImageIndex& index, const std::string& path);
ImageIndex load_image_index(const std::string& path);

bool has_jpeg_extension(const std::string& filename);

}  // namespace sg
