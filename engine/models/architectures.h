#pragma once
// The one loader: a GGUF file to a model of its general.architecture. Every
// architecture kiln runs is registered in architectures.cpp, one line each;
// kiln, kiln-perplexity, kiln-bench (and the server to come) load through here.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/causal_lm.h"
#include "engine/models/decoder_lm.h"

namespace kiln {

class TransformerModel;

// The decoder-only architectures, by general.architecture name.
std::vector<std::string> decoder_architectures();

// A decoder-only model; an encoder-decoder or unknown architecture is a
// kiln::Error naming it and listing the supported ones.
// `placement`: mapped (the default) or copied, locked or not (weight_placement.h).
std::unique_ptr<CausalLm> load_causal_lm(std::shared_ptr<const GgufFile> file, WeightPlacement placement = {});

// One stage of a decoder-only model split by layers across processes
// (layer_pipeline.h): stage(architecture) picks the blocks once the
// architecture is known. The same errors as load_causal_lm.
std::unique_ptr<DecoderLm> load_decoder_stage(std::shared_ptr<const GgufFile> file, WeightPlacement placement,
                                              const std::function<LayerStage(const DecoderArch&)>& stage);

// Whether the file holds an encoder-decoder model (general.architecture "transformer").
bool is_seq2seq(const GgufFile& file);

// An encoder-decoder model; any other architecture is a kiln::Error naming it.
std::unique_ptr<TransformerModel> load_seq2seq(std::shared_ptr<const GgufFile> file, WeightPlacement placement = {});

// Checks, without placing any weights, that kiln runs the file: its
// architecture is registered and its hyper-parameters and every tensor fit it.
// Returns the architecture; a kiln::Error names what does not fit.
std::string check_model(const GgufFile& file);

}  // namespace kiln
