#pragma once
// Compiled graphs kept by batch shape: built on first use, reused after.
#include <utility>

namespace kiln {

// The entry of `key`, built by `build(entry)` when it is new. A build that
// throws leaves no half-built entry behind.
template <typename Map, typename Key, typename Build>
typename Map::mapped_type& cached_graph(Map& map, const Key& key, Build&& build) {
    auto [it, inserted] = map.try_emplace(key);
    if (inserted) {
        try {
            build(it->second);
        } catch (...) {
            map.erase(it);
            throw;
        }
    }
    return it->second;
}

}  // namespace kiln
