#pragma once
// Python's str methods on UTF-8 text, as far as templates need them. Case
// changes cover ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (Python
// maps every script, and "ß".upper() to "SS"; kiln leaves those as they are).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::chat {

// str.strip/lstrip/rstrip: whitespace, or the code points of `chars`.
std::string python_strip(std::string_view text, const std::string* chars, bool left, bool right);
// str.split/rsplit: on runs of whitespace when `separator` is null.
std::vector<std::string> python_split(std::string_view text, const std::string* separator, int64_t max_split, bool from_right);
std::vector<std::string> python_splitlines(std::string_view text);
std::string python_replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count);
int64_t python_count(std::string_view text, std::string_view sub);
std::string python_upper(std::string_view text);  // str.upper()
std::string python_lower(std::string_view text);  // str.lower()
std::string python_title(std::string_view text);
std::string python_capitalize(std::string_view text);
// jinja2's escape filter: & < > " ' as HTML entities.
std::string html_escape(std::string_view text);

}  // namespace kiln::chat
