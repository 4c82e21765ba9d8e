#include "cli/commands.h"
#include "imagenet/prepare_imagenet.h"
#include "prepare/run_prepare.h"
#include "util/error.h"

namespace sg {

int run_prepare_command(const PrepareArguments& args) {
  if (args.kind == "imagenet") {
    ImagenetPrepareOptions options;
    options.pack = args.pack;
    options.pack_short_side = args.pack_short_side;
    options.threads = args.threads;
    options.full_decode = args.full_decode;
    options.strict = args.strict;
    return run_prepare_imagenet(args.src, args.dst, options);
  }
  PrepareOptions options;
  options.tokenizer_dir = args.tokenizer_dir;
  options.shard_size = args.shard_size;
  options.val_tokens = args.val_tokens;
  options.emit_text = args.emit_text;
  options.threads = args.threads;
  options.force = args.force;
  return run_prepare(args.kind, args.src, args.dst, options);
}

}  // namespace sg
