#pragma once
// A model too big for one machine's memory, split by layers across the ranks
// of a job (kiln and kiln-perplexity --layer-split). Rank r holds a
// contiguous range of blocks (rank 0 also the embeddings, the last rank the
// output norm and head): only those tensors are placed, so only their pages
// of the file mapping are ever read, and its sessions cache only its layers.
//
// Rank 0 runs the tool as one process would. Each batch its session
// evaluates goes through the stages in order: rank 0's blocks, then the
// residual stream ([width, n] floats) to rank 1, ... and the last rank's
// logits back to rank 0. The other ranks run serve_layer_split() until rank
// 0's model is gone. Every float crosses unchanged, so the logits are the
// ones one process computes.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/distributed/collective.h"
#include "engine/models/block_context.h"
#include "engine/models/causal_lm.h"
#include "formats/gguf/gguf_file.h"

namespace kiln {

class DecoderArch;
class ThreadPool;

// Contiguous block ranges, one per rank, whose bytes (their blocks, plus the
// embeddings on rank 0 and the output norm and head on the last rank) are as
// near as contiguous blocks allow to shares in proportion to `weights` (one
// per rank; empty: equal). Every rank gets a block at least.
std::vector<LayerStage> plan_layer_split(const GgufFile& file, const DecoderArch& arch, std::span<const double> weights,
                                         int ranks);

// This rank's stage of the model in `file`; on rank 0 a model whose sessions
// drive the whole pipeline. `description` receives the plan in words
// (describe_layer_split).
// Throws a CollectiveError when the model cannot be split so (an
// architecture that cannot, fewer blocks than ranks).
std::unique_ptr<CausalLm> load_layer_split(std::shared_ptr<const GgufFile> file, WeightPlacement placement,
                                           Collective& ranks, std::span<const double> weights,
                                           std::string* description = nullptr);

// Ranks other than 0: evaluates what rank 0's sessions ask of this stage
// until rank 0's model is destroyed.
void serve_layer_split(CausalLm& stage, Collective& ranks, ThreadPool& pool);

// A one-line description of a plan ("blocks 0-10 on rank 0 (612.3 MiB), ...").
std::string describe_layer_split(const GgufFile& file, const DecoderArch& arch, std::span<const LayerStage> plan);

// The bytes a stage places: its blocks' tensors and the whole-model tensors it uses.
uint64_t layer_stage_bytes(const GgufFile& file, const DecoderArch& arch, const LayerStage& stage);

}  // namespace kiln
