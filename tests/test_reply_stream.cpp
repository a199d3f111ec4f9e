// What a streamed reply shows: whole characters, and nothing of a stop string,
// however the generated pieces cut the text.
#include <catch2/catch.hpp>

#include "engine/core/error.h"
#include "engine/runtime/reply_stream.h"

using namespace kiln;

namespace {

// Feeds the pieces, collecting what is shown after each.
struct Shown {
    std::vector<std::string> steps;
    std::string all;
    bool stopped = false;
};

Shown stream(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
    ReplyStream reply(std::move(stops));
    Shown out;
    for (const std::string& p : pieces) {
        out.steps.push_back(reply.feed(p));
        out.all += out.steps.back();
        if (reply.stopped()) break;
    }
    out.all += reply.flush();
    out.stopped = reply.stopped();
    return out;
}

}  // namespace

TEST_CASE("without stop strings every whole character is shown at once", "[reply_stream]") {
    const Shown s = stream({}, {"Hel", "lo", " \xE4", "\xB8\xAD", "!"});
    CHECK(s.steps == std::vector<std::string>{"Hel", "lo", " ", "\xE4\xB8\xAD", "!"});
    CHECK(s.all == "Hello \xE4\xB8\xAD!");
    CHECK_FALSE(s.stopped);
}

TEST_CASE("a stop string cut across pieces is held back and never shown", "[reply_stream]") {
    const Shown s = stream({"<|user|>"}, {"Sure.", " <|", "us", "er|> more"});
    CHECK(s.steps == std::vector<std::string>{"Sure.", " ", "", ""});
    CHECK(s.all == "Sure. ");
    CHECK(s.stopped);
}

TEST_CASE("held-back text that turns out not to be a stop string is shown", "[reply_stream]") {
    const Shown s = stream({"\nUser:"}, {"a\n", "Us", "ually"});
    CHECK(s.steps == std::vector<std::string>{"a", "", "\nUsually"});
    CHECK(s.all == "a\nUsually");
    CHECK_FALSE(s.stopped);
    // Generation ends inside a possible stop string: the tail is plain text.
    const Shown end = stream({"\nUser:"}, {"b\nUse"});
    CHECK(end.steps == std::vector<std::string>{"b"});
    CHECK(end.all == "b\nUse");
    CHECK_FALSE(end.stopped);
}

TEST_CASE("the earliest stop string wins, and the text before it is kept", "[reply_stream]") {
    ReplyStream reply({"END", "D"});
    CHECK(reply.feed("xxENDyy") == "xx");  // "END" begins at 2, "D" only at 4
    CHECK(reply.stopped());
    CHECK(reply.stop_found() == "END");
    CHECK(reply.feed("more").empty());
    CHECK(reply.flush().empty());
}

TEST_CASE("stop strings with multibyte characters match whole characters", "[reply_stream]") {
    const Shown s = stream({"\xE3\x80\x82\xE3\x80\x82"}, {"ok\xE3", "\x80\x82", "\xE3\x80", "\x82tail"});
    CHECK(s.all == "ok");
    CHECK(s.stopped);
}

TEST_CASE("empty or invalid stop strings are refused", "[reply_stream]") {
    CHECK_THROWS_AS(ReplyStream({""}), Error);
    CHECK_THROWS_AS(ReplyStream({"\xFF"}), Error);
}
