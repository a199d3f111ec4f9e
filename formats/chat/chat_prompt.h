#pragma once
// The tokens of a rendered chat prompt. Templates often write the BOS token's
// text themselves ("{{ bos_token }}..."), and the vocabulary may also ask for a
// BOS in front of every prompt: the prompt then gets one BOS, not two (two
// BOS tokens change what most models generate; llama.cpp warns about it).
// Special tokens written by the template (<|im_start|>, <end_of_turn>) always
// become their ids: the template writes them on purpose.
#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

class Tokenizer;

std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tokenizer, std::string_view rendered);

}  // namespace kiln
