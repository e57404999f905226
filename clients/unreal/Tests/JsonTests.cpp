// The JSON reader's caps and readings: a text past its cap is refused unread, a number literal of any length is
// read in one pass as the double nearest it, a key given twice keeps its last value, nesting is bounded.
#include <doctest/doctest.h>

#include <cmath>

#include "NpcMindCore/Json.h"
#include "NpcMindCore/Lines.h"

using namespace npcmind;

TEST_CASE("a text past its cap is refused, naming the cap") {
    std::string text = "[" + std::string(2000, ' ') + "]";
    Parsed p = Json::Parse(text, 1024);
    CHECK_FALSE(p.Ok());
    CHECK(p.error.find("larger than 1024 bytes") != std::string::npos);
    CHECK(Json::Parse(text, 4096).Ok());
}

TEST_CASE("number literals are read as the nearest double, whatever their length") {
    double d = 0;
    bool integer = false;
    CHECK(Json::ReadNumber("0.1", d, integer));
    CHECK(d == 0.1);
    CHECK_FALSE(integer);
    CHECK(Json::ReadNumber("9007199254740993", d, integer));
    CHECK(d == 9007199254740992.0);
    CHECK(integer);
    // a million digits: read (as Infinity, past the float range), not refused for its length
    CHECK(Json::ReadNumber(std::string(1000000, '7'), d, integer));
    CHECK(std::isinf(d));
    // a million fraction digits after 0.5: the sticky digit keeps the rounding exact
    CHECK(Json::ReadNumber("0." + std::string(1000000, '3'), d, integer));
    CHECK(d == 1.0 / 3.0);
    Parsed p = Json::Parse("[1e999, -1" + std::string(400, '0') + ", 2]");
    REQUIRE(p.Ok());
    CHECK(std::isinf(p.value.Items()[0].AsNumber()));
    CHECK(p.value.Items()[1].AsNumber() < 0);
    CHECK(p.value.Items()[2].AsNumber() == 2);
    CHECK_FALSE(Json::ReadNumber("1.", d, integer));
    CHECK_FALSE(Json::ReadNumber("--1", d, integer));
}

TEST_CASE("a key given twice keeps its first place and its last value") {
    Parsed p = Json::Parse("{\"a\": 1, \"b\": 2, \"a\": 3}");
    REQUIRE(p.Ok());
    CHECK(p.value.Size() == 2);
    CHECK(p.value.Members()[0].key == "a");
    CHECK(p.value["a"].AsNumber() == 3);
}

TEST_CASE("nesting past the bound is an error, not a stack overflow") {
    Parsed p = Json::Parse(std::string(100000, '['));
    CHECK_FALSE(p.Ok());
    CHECK(p.error.find("nested deeper than 512") != std::string::npos);
    CHECK_FALSE(Json::Parse("\"\xff\"").Ok());  // not UTF-8
}

TEST_CASE("lines: a chunk may cut a line anywhere; an overlong line is dropped, not kept") {
    Lines lines;
    CHECK(lines.Feed("{\"a\":").empty());
    CHECK(lines.Partial());
    auto got = lines.Feed("1}\n\n{\"b\"");
    REQUIRE(got.size() == 1);
    CHECK(got[0] == "{\"a\":1}");
    lines.Feed(std::string(Lines::MaxLine + 10, 'x'));
    CHECK(lines.Overlong == 1);
    CHECK(lines.Feed("\nok\n") == std::vector<std::string>{"ok"});
}
