// The signed payload, and Ed25519 verification by OpenSSL's EVP interface.
#include "NpcMindCore/Signing.h"

#include <openssl/evp.h>

namespace npcmind {

bool Signing::SignedPayload(const std::string& npcId, const Value& finalize, const Value& tape, Value& out,
                            NotCanonical* error) {
    Value verdict = Value::MakeObject();
    for (const auto& m : finalize.Members())
        if (m.key != "signature") verdict.Members().push_back(m);
    std::string digest;
    if (!Jcs::Digest(tape, digest, error)) return false;
    const Value* audit = verdict.Get("ruleAudit");
    out = Value::MakeObject();
    out.Set("attests", Attests);
    out.Set("npcId", npcId);
    out.Set("rulesetId", audit && audit->IsObject() ? (*audit)["preset"] : Value());
    out.Set("tapeDigest", digest);
    out.Set("rulesetVerdict", verdict);
    return true;
}

std::string Signing::B64(const std::string& raw) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    size_t i = 0;
    for (; i + 2 < raw.size(); i += 3) {
        uint32_t n = (uint8_t(raw[i]) << 16) | (uint8_t(raw[i + 1]) << 8) | uint8_t(raw[i + 2]);
        for (int k = 18; k >= 0; k -= 6) out.push_back(alphabet[(n >> k) & 63]);
    }
    size_t left = raw.size() - i;
    if (left > 0) {
        uint32_t n = uint8_t(raw[i]) << 16;
        if (left == 2) n |= uint8_t(raw[i + 1]) << 8;
        out.push_back(alphabet[(n >> 18) & 63]);
        out.push_back(alphabet[(n >> 12) & 63]);
        if (left == 2) out.push_back(alphabet[(n >> 6) & 63]);
    }
    return out;
}

bool Signing::Unb64(const std::string& text, std::string& out) {
    if (text.size() % 4 == 1) return false;
    out.clear();
    uint32_t acc = 0;
    int bits = 0;
    for (char c : text) {
        int v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '-') v = 62;
        else if (c == '_') v = 63;
        else return false;
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xFF));
        }
    }
    return true;
}

bool Signing::Verify(const std::string& signature, const std::string& payload,
                     const std::map<std::string, std::string>& keys) {
    size_t dot = signature.find('.');
    if (signature.empty() || dot == std::string::npos) return false;
    std::string kid = signature.substr(0, dot), sig = signature.substr(dot + 1), sigRaw, keyRaw;
    auto key = keys.find(kid);
    if (sig.empty() || key == keys.end()) return false;
    if (!Unb64(sig, sigRaw) || !Unb64(key->second, keyRaw) || B64(sigRaw) != sig) return false;  // no malleable bits
    if (keyRaw.size() != 32 || sigRaw.size() != 64) return false;
    EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                                 reinterpret_cast<const unsigned char*>(keyRaw.data()), keyRaw.size());
    if (!pkey) return false;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
              EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sigRaw.data()), sigRaw.size(),
                               reinterpret_cast<const unsigned char*>(payload.data()), payload.size()) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return ok;
}

}  // namespace npcmind
