#pragma once
// The chat page served at / (tools/server/chat_page.html, embedded into the
// binary when CMake configures: the server reads no files at run time).
#include <string_view>

namespace kiln::server {

std::string_view chat_page_html();

}  // namespace kiln::server
