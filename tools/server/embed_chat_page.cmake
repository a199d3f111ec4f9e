# Embeds chat_page.html into a C++ source as bytes (run at configure time and
# again whenever the page changes, since it is a configure dependency).
function(kiln_embed_chat_page html out)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${html})
  file(READ ${html} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  set(KILN_CHAT_PAGE_BYTES "${bytes}")
  configure_file(${CMAKE_CURRENT_SOURCE_DIR}/chat_page.cpp.in ${out} @ONLY)
endfunction()
