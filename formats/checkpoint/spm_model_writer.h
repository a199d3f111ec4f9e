#pragma once
// A SentencePiece model file (tokenizer.model: a serialized protobuf
// ModelProto) written by hand in the wire format, the inverse of
// spm_model.h's parser, for kiln-convert --to safetensors.
//
// Written (protobuf field numbers, in this order; proto2, every field explicit):
//   ModelProto 1 pieces: SentencePiece 1 piece (bytes), 2 score (fixed32
//     float), 3 type (varint; written only when not 1 = normal, its default)
//   ModelProto 2 trainer_spec: TrainerSpec 3 model_type (1 unigram, 2 BPE),
//     4 vocab_size, 35 byte_fallback, 40 unk_id, 41 bos_id, 42 eos_id,
//     43 pad_id (int32: -1 is a 10-byte varint), then 45..48 unk/bos/eos/pad
//     pieces (their texts, when the id names a piece; 44 is unk_surface)
//   ModelProto 3 normalizer_spec: NormalizerSpec 1 name ("identity"),
//     3 add_dummy_prefix, 4 remove_extra_whitespaces, 5 escape_whitespaces (true)
// The bytes depend only on the arguments.
#include <cstddef>
#include <vector>

#include "formats/checkpoint/spm_model.h"

namespace kiln {

struct SpmWriteOptions {
    int32_t model_type = 2;  // TrainerSpec.ModelType: 1 UNIGRAM, 2 BPE (Llama's)
    bool remove_extra_whitespaces = false;
};

std::vector<std::byte> write_spm_model(const SpmModel& model, const SpmWriteOptions& options = {});

}  // namespace kiln
