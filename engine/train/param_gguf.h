#pragma once
// A ParamModel in GGUF, for every trained architecture: its tensors under
// their own names (matrices in a chosen type), and what a training checkpoint
// adds to the model file: the AdamW moments as tensors "adam_m.<tensor>" and
// "adam_v.<tensor>" (F32, the parameter's shape), the optimizer step and the
// batch sampler's generator state under "kiln.train.*".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/train/param_model.h"

#include "formats/gguf/gguf_file.h"

namespace kiln {
class GgufWriter;
}  // namespace kiln

namespace kiln::train {

struct TrainingState {
    int64_t step = 0;            // optimizer steps done
    uint64_t rng_state = 0;      // the batch sampler's generator
    std::vector<float> adam_m, adam_v;  // flat, as the model's buffer
};

// Adds every tensor of the model to `w`: 1-D tensors F32, matrices in `type`
// (F16 when their rows are not whole blocks of it). F32 tensors are borrowed
// from the model, converted ones kept in `converted`; both until w.write().
void add_param_tensors(GgufWriter& w, const ParamModel& model, DType type, std::vector<std::vector<std::byte>>& converted);

// Adds the state's keys and moment tensors to `w`; the moments are borrowed
// until w.write(). kiln::Error("gguf") when they do not match the model.
void add_training_state(GgufWriter& w, const ParamModel& model, const TrainingState& state);

// Copies every tensor of `model` (F32, its exact shape) out of `file` into a
// flat buffer laid out as model.data(). `where` names the file in errors.
std::vector<float> read_param_tensors(const GgufFile& file, const ParamModel& model, const std::string& where);

// Fills `w` with a trained model's file: the architecture's metadata, the
// tokenizer's, every parameter (add_param_tensors) and, for a checkpoint (F32
// only), the training state. `converted` keeps converted tensors until w.write().
void describe_trained_model(GgufWriter& w, std::vector<GgufEntry> architecture, std::vector<GgufEntry> tokenizer,
                            const ParamModel& model, DType type, const TrainingState* training,
                            std::vector<std::vector<std::byte>>& converted);

// The tokenizer metadata of a character vocabulary (tokenizer.ggml.model
// "char", every token normal, no BOS added), as kiln-train writes it.
std::vector<GgufEntry> char_tokenizer_metadata(const std::vector<std::string>& tokens);

// The file's tokenizer.ggml.tokens (the character vocabulary of a trained
// model); kiln::Error("checkpoint") when missing or not strings.
std::vector<std::string> read_vocabulary(const GgufFile& file, const std::string& where);

// The training state of a checkpoint; nothing for a plain model file.
std::optional<TrainingState> read_training_state(const GgufFile& file, const ParamModel& model, const std::string& where);

}  // namespace kiln::train
