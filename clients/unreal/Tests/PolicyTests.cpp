// The distilled policy on the shared vectors (clients/conformance/policy/): the C++ evaluator gives the same choice
// for every case as the other SDKs, and refuses the same malformed files with the same message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "Cases.h"
#include "NpcMindCore/Policy.h"

using namespace npcmind;

namespace {

std::string Folder() { return cases::Repo() + "/clients/conformance/policy/"; }

/// A vector's object as JSON text: an integer past the float range was read as an infinity and is written back
/// as 1e999 (a number past the range again), as the README says.
Value Swap(const Value& v) {
    if (v.IsNumber() && std::isinf(v.AsNumber())) return Value(v.AsNumber() > 0 ? "\x01inf" : "-\x01inf");
    if (v.IsArray()) {
        Value out = Value::MakeArray();
        for (const auto& x : v.Items()) out.Push(Swap(x));
        return out;
    }
    if (v.IsObject()) {
        Value out = Value::MakeObject();
        for (const auto& m : v.Members()) out.Members().push_back(Member{m.key, Swap(m.value)});
        return out;
    }
    return v;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
}

std::string WriteWithInfinity(const Value& v) {
    std::string text = Json::Show(Swap(v));
    return Replace(Replace(text, "\"-\\u0001inf\"", "-1e999"), "\"\\u0001inf\"", "1e999");
}

}  // namespace

TEST_CASE("every policy vector gives the choice the other SDKs give") {
    Value blocks = cases::Read(Folder() + "cases.json");
    CHECK(blocks.Size() == 3);
    int run = 0;
    for (const auto& block : blocks.Items()) {
        std::string file = block["policy"].AsString(), version = block["manifest_version"].AsString(), error;
        std::string text = cases::ReadText(Folder() + file);
        auto policy = Policy::Load(text, error, version);
        REQUIRE_MESSAGE(policy != nullptr, (std::string() + file + ": " + error));
        auto fromObject = Policy::Load(Json::Parse(text).value, error, version);
        REQUIRE(fromObject != nullptr);
        for (const auto& c : block["cases"].Items()) {
            run++;
            auto got = policy->Choose(c["type"], c["observation"], c["legal_actions"], c["world"], c["scope_state"],
                                      c["trigger"], c["profile"]);
            auto again = fromObject->Choose(c["type"], c["observation"], c["legal_actions"], c["world"],
                                            c["scope_state"], c["trigger"], c["profile"]);
            std::string name = file + ": " + c["name"].AsString();
            CHECK_MESSAGE(got.has_value() == again.has_value(), name);
            const Value& expect = c["expect"];
            if (expect.IsNull()) {
                CHECK_MESSAGE(!got, (std::string() + name + ": expected no choice, got " + (got ? got->Action : "")));
                continue;
            }
            REQUIRE_MESSAGE(got.has_value(), (std::string() + name + ": expected " + Json::Show(expect) + ", got no choice"));
            CHECK_MESSAGE(got->Action == expect["action"].AsString(), name);
            CHECK_MESSAGE(std::fabs(got->Confidence - expect["confidence"].AsNumber()) <= 1e-12, name);
        }
        // a file for another manifest version is refused, naming its own
        CHECK(Policy::Load(text, error, "sha256:another") == nullptr);
        CHECK(error.find(version) != std::string::npos);
        CHECK(error.find("sha256:another") != std::string::npos);
    }
    std::printf("policy vectors: %d run\n", run);
    CHECK(run > 20);
}

TEST_CASE("every refused policy vector is refused with its message, from each form") {
    Value vectors = cases::Read(Folder() + "refused.json");
    CHECK(vectors.Size() > 20);
    std::printf("refused vectors: %d run\n", static_cast<int>(vectors.Size()));
    for (const auto& v : vectors.Items()) {
        std::string says = v["says"].AsString(), name = v["name"].AsString(), error;
        std::vector<std::pair<std::string, std::string>> texts;  // form -> text (bytes are text here)
        if (v.Has("policy")) {
            CHECK_MESSAGE(Policy::Load(v["policy"], error) == nullptr, (name + " from its object"));
            CHECK_MESSAGE(error.find(says) != std::string::npos, (std::string() + name + " from its object: " + error));
            texts.emplace_back("text", WriteWithInfinity(v["policy"]));
        }
        if (v.Has("text")) {
            std::string text;
            for (const auto& part : v["text"].Items()) {
                if (part.IsString()) text += part.AsString();
                else
                    for (int i = 0; i < static_cast<int>(part.Items()[1].AsNumber()); i++) text += part.Items()[0].AsString();
            }
            texts.emplace_back("text", text);
        }
        if (v.Has("bytes_hex")) {
            std::string hex = v["bytes_hex"].AsString(), bytes;
            for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
            texts.emplace_back("bytes", bytes);
        }
        CHECK_MESSAGE(!texts.empty(), (std::string() + name + ": a vector with no input"));
        for (const auto& t : texts) {
            error.clear();
            CHECK_MESSAGE(Policy::Load(t.second, error) == nullptr, (name + " from its " + t.first));
            CHECK_MESSAGE(error.find(says) != std::string::npos, (std::string() + name + " from its " + t.first + ": " + error));
        }
    }
}

TEST_CASE("rounding to a quantum is half to even") {
    CHECK(Policy::RoundHalfEven(0.5) == 0.0);
    CHECK(Policy::RoundHalfEven(1.5) == 2.0);
    CHECK(Policy::RoundHalfEven(2.5) == 2.0);
    CHECK(Policy::RoundHalfEven(-2.5) == -2.0);
    CHECK(Policy::RoundHalfEven(-1.5) == -2.0);
    CHECK(Policy::RoundHalfEven(2.5000000000000004) == 3.0);
}
