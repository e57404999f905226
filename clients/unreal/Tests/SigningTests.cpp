// docs/signature-vectors.json in C++: the canonical JSON and digests the service makes, RFC 8785's numbers, the
// signed payload, and its Ed25519 check through OpenSSL (a changed byte anywhere fails).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "Cases.h"
#include "NpcMindCore/Signing.h"

using namespace npcmind;

namespace {
Value Vectors() { return cases::Read(cases::Repo() + "/docs/signature-vectors.json"); }
}  // namespace

TEST_CASE("canonical form and digest as the service makes them") {
    Value all = Vectors()["canonical"];
    CHECK(all.Size() > 0);
    for (const auto& v : all.Items()) {
        Parsed p = Json::Parse(v["json"].AsString());
        REQUIRE_MESSAGE(p.Ok(), (std::string() + v["name"].AsString() + ": " + p.error));
        std::string canonical, digest;
        CHECK(Jcs::Canonical(p.value, canonical));
        CHECK_MESSAGE(canonical == v["canonical"].AsString(), v["name"].AsString());
        CHECK(Jcs::Digest(p.value, digest));
        CHECK_MESSAGE(digest == v["sha256"].AsString(), v["name"].AsString());
    }
}

TEST_CASE("every number of RFC 8785 appendix B is written as ECMAScript writes it") {
    Value numbers = Vectors()["numbers"];
    CHECK(numbers.Size() > 20);
    for (const auto& n : numbers.Items()) {
        uint64_t bits = std::stoull(n["ieee754"].AsString(), nullptr, 16);
        double x;
        std::memcpy(&x, &bits, sizeof x);
        std::string got;
        CHECK(Jcs::Canonical(Value(x), got));
        CHECK_MESSAGE(got == n["canonical"].AsString(), (std::string() + "ieee754 " + n["ieee754"].AsString()));
    }
}

TEST_CASE("a number no double holds has no canonical form, and its path is said") {
    Value refused = Vectors()["refused"];
    CHECK(refused.Size() > 0);
    for (const auto& v : refused.Items()) {
        Parsed p = Json::Parse(v["json"].AsString());
        std::string out;
        NotCanonical why;
        CHECK_FALSE(Jcs::Canonical(p.value, out, &why));
        CHECK_MESSAGE(why.path == v["path"].AsString(), why.Message());
    }
    Value state = Value::MakeObject();
    state.Set("gold", std::nan(""));
    Value nested = Value::MakeObject();
    nested.Set("npcState", state);
    std::string out;
    NotCanonical why;
    CHECK_FALSE(Jcs::Canonical(nested, out, &why));
    CHECK(why.path == "npcState.gold");
}

TEST_CASE("the signed payload is the bytes the service signed, and OpenSSL verifies it; any changed byte fails") {
    Value all = Vectors()["signatures"];
    REQUIRE(all.Size() > 0);
    for (const auto& v : all.Items()) {
        Value tape = Json::Parse(v["tapeJson"].AsString()).value;
        std::string digest, canonical;
        CHECK(Jcs::Digest(tape, digest));
        CHECK(digest == v["tapeDigest"].AsString());
        Value payload;
        REQUIRE(Signing::SignedPayload(v["npcId"].AsString(), v["finalize"], tape, payload));
        REQUIRE(Jcs::Canonical(payload, canonical));
        CHECK(canonical == v["payloadCanonical"].AsString());
        CHECK(canonical.find("\"signature\"") == std::string::npos);
        std::map<std::string, std::string> keys{{v["kid"].AsString(), v["publicKey"].AsString()}};
        std::string sig = v["finalize"]["signature"].AsString();
        CHECK(Signing::Verify(sig, canonical, keys));
        for (size_t i = 0; i < canonical.size(); i += 7) {  // a changed byte anywhere in the payload
            std::string changed = canonical;
            changed[i] = static_cast<char>(changed[i] ^ 1);
            CHECK_FALSE(Signing::Verify(sig, changed, keys));
        }
        std::string other = sig;
        other[other.size() - 3] = other[other.size() - 3] == 'A' ? 'B' : 'A';
        CHECK_FALSE(Signing::Verify(other, canonical, keys));
        CHECK_FALSE(Signing::Verify(sig, canonical, {{"another", v["publicKey"].AsString()}}));
        CHECK_FALSE(Signing::Verify(sig + "=", canonical, keys));
    }
}
