#include "formats/chat/chat_prompt.h"

#include "formats/tokenizer/tokenizer.h"

namespace kiln {

std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tokenizer, std::string_view rendered) {
    EncodeOptions options = tokenizer.prompt_options(/*parse_special=*/true);
    // A chat prompt goes on with the reply: no EOS after it, whatever the vocabulary says for plain prompts.
    options.add_eos = false;
    std::vector<int32_t> tokens = tokenizer.encode(rendered, options);
    const int32_t bos = tokenizer.bos();
    if (options.add_bos && bos >= 0 && tokens.size() >= 2 && tokens[0] == bos && tokens[1] == bos)
        tokens.erase(tokens.begin());
    return tokens;
}

}  // namespace kiln
