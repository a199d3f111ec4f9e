#pragma once
// Text from files (metadata keys, tensor names, token strings) can hold any
// bytes. Before it reaches a terminal or an error message it is escaped, so a
// hostile name can neither break a one-line error nor emit control sequences.
#include <string>
#include <string_view>

namespace kiln {

// Escapes quotes, backslashes and control bytes (\n, \t, \xNN); keeps UTF-8 as is.
// Longer strings are cut after `max_bytes` with a note of their full length.
std::string printable(std::string_view s, size_t max_bytes = 200);

}  // namespace kiln
