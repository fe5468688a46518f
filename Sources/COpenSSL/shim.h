// COpenSSL: the one header SpeakBridgeTLS imports — OpenSSL's libcrypto, for the desktop's self-signed web
// certificate (the browser route).
//
// libcrypto is not linked (the modulemap has no `link`): linking it (and libssl) made every process load and bind
// it at start-up, about 3,400 symbol bindings, although only the browser route's certificate calls it directly.
// The headers still give the types; the functions are reached through `struct sb_crypto_api`, filled by dlsym from
// the handle of libcrypto.so.3. The helpers below take the table as their first parameter and call nothing else of
// OpenSSL's; calling an OpenSSL function directly, from here or from Swift, would fail at link time (undefined
// symbol), which keeps every call going through the table. Several of OpenSSL's names are macros over another
// function, and the table holds the function: EVP_EC_gen is EVP_PKEY_Q_keygen (variadic: kept as an untyped
// function pointer, called through a cast to the header's prototype), BIO_get_mem_data is BIO_ctrl, OPENSSL_free is CRYPTO_free;
// X509V3_set_ctx_nodb is a macro that only clears a field, so it stays a macro.
//
// The helpers exist because Swift cannot reach what they wrap (macros, a variadic function), and the OpenSSL
// stack/ASN.1 plumbing is far clearer as a few lines of C than as pointer juggling in Swift. Each returns 1 on
// success, 0 on failure, and frees everything it made on every path.
#ifndef SPEAKBRIDGE_COPENSSL_SHIM_H
#define SPEAKBRIDGE_COPENSSL_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

// Every libcrypto function the helpers below call, once, but EVP_PKEY_Q_keygen (below). X(name) for each.
#define SB_CRYPTO_SYMBOLS(X) \
    X(EVP_PKEY_free) \
    X(EVP_sha256) \
    X(BIO_s_mem) \
    X(BIO_new) \
    X(BIO_new_mem_buf) \
    X(BIO_ctrl) \
    X(BIO_free) \
    X(BIO_free_all) \
    X(PEM_write_bio_PrivateKey) \
    X(PEM_read_bio_PrivateKey) \
    X(PEM_write_bio_X509) \
    X(RAND_bytes) \
    X(BN_bin2bn) \
    X(BN_to_ASN1_INTEGER) \
    X(BN_free) \
    X(X509_new) \
    X(X509_free) \
    X(X509_get_serialNumber) \
    X(X509_set_version) \
    X(X509_gmtime_adj) \
    X(X509_getm_notBefore) \
    X(X509_getm_notAfter) \
    X(X509_set_pubkey) \
    X(X509_get_subject_name) \
    X(X509_NAME_add_entry_by_txt) \
    X(X509_set_issuer_name) \
    X(X509V3_set_ctx) \
    X(X509V3_EXT_conf_nid) \
    X(X509_add_ext) \
    X(X509_EXTENSION_free) \
    X(X509_sign) \
    X(i2d_X509) \
    X(i2d_PUBKEY) \
    X(CRYPTO_free)

// A function pointer of no particular type: EVP_PKEY_Q_keygen's field. That function is variadic, and Swift
// imports no variadic function pointer (the table, with such a field, would not be Sendable for the loader's
// `static let`); sb_ec_key_pem casts it back to the header's prototype to call it, which C allows.
typedef void (*sb_crypto_function)(void);

// One non-null function pointer per symbol, typed from the library's own declaration (__typeof__), so the helpers
// call them with exactly the header's signatures: `api->BIO_free(bio)`.
#define SB_CRYPTO_FIELD(name) __typeof__(name) *_Nonnull name;
struct sb_crypto_api {
    sb_crypto_function _Nonnull EVP_PKEY_Q_keygen;
    SB_CRYPTO_SYMBOLS(SB_CRYPTO_FIELD)
};
#undef SB_CRYPTO_FIELD

// Fills *api from `handle` (a dlopen handle of libcrypto.so.3). Returns NULL when every symbol was found, else the
// name of the first missing one (then *api is partly written and must not be used).
#define SB_CRYPTO_RESOLVE(name) \
    if ((api->name = (__typeof__(name) *)dlsym(handle, #name)) == NULL) return #name;
static inline const char *_Nullable sb_crypto_resolve(void *_Nonnull handle, struct sb_crypto_api *_Nonnull api) {
    if ((api->EVP_PKEY_Q_keygen = (sb_crypto_function)dlsym(handle, "EVP_PKEY_Q_keygen")) == NULL)
        return "EVP_PKEY_Q_keygen";
    SB_CRYPTO_SYMBOLS(SB_CRYPTO_RESOLVE)
    return NULL;
}
#undef SB_CRYPTO_RESOLVE

/// A fresh ECDSA P-256 key as PKCS#8 PEM (malloc'd into *pem / *pem_len; the caller wipes and frees it).
static inline int sb_ec_key_pem(const struct sb_crypto_api *_Nonnull api, char *_Nullable *_Nonnull pem,
                                long *_Nonnull pem_len) {
    int ok = 0;
    // EVP_EC_gen("P-256"), which is EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve name), through its own prototype.
    __typeof__(EVP_PKEY_Q_keygen) *keygen = (__typeof__(EVP_PKEY_Q_keygen) *)api->EVP_PKEY_Q_keygen;
    EVP_PKEY *key = keygen(NULL, NULL, "EC", (char *)"P-256");
    BIO *bio = api->BIO_new(api->BIO_s_mem());
    if (key && bio && api->PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        char *data = NULL;
        // BIO_get_mem_data(bio, &data)
        long len = api->BIO_ctrl(bio, BIO_CTRL_INFO, 0, (char *)&data);
        *pem = malloc((size_t)len);
        if (*pem && len > 0) { memcpy(*pem, data, (size_t)len); *pem_len = len; ok = 1; }
    }
    if (bio) api->BIO_free_all(bio);
    if (key) api->EVP_PKEY_free(key);
    return ok;
}

/// Appends one X509v3 extension given in OpenSSL's config syntax.
static inline int sb_add_ext(const struct sb_crypto_api *_Nonnull api, X509 *_Nonnull cert, int nid,
                             const char *_Nonnull value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    api->X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = api->X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) return 0;
    int ok = api->X509_add_ext(cert, ext, -1);
    api->X509_EXTENSION_free(ext);
    return ok == 1;
}

/// A self-signed certificate for the key in `key_pem`: subject CN = `common_name`, subjectAltName = `san`
/// (e.g. "IP:192.0.2.10,IP:127.0.0.1"), valid from an hour ago for `days` days, serverAuth, signed with
/// ECDSA-SHA256. Outputs the PEM certificate (malloc'd), its DER form and the DER SubjectPublicKeyInfo (both
/// allocated by OpenSSL: release them with sb_openssl_free).
static inline int sb_self_signed(const struct sb_crypto_api *_Nonnull api,
                                 const char *_Nullable key_pem, long key_len, const char *_Nonnull common_name,
                                 const char *_Nonnull san, long days,
                                 char *_Nullable *_Nonnull cert_pem, long *_Nonnull cert_pem_len,
                                 unsigned char *_Nullable *_Nonnull cert_der, int *_Nonnull cert_der_len,
                                 unsigned char *_Nullable *_Nonnull spki_der, int *_Nonnull spki_der_len) {
    int ok = 0;
    BIO *in = api->BIO_new_mem_buf(key_pem, (int)key_len);
    EVP_PKEY *key = in ? api->PEM_read_bio_PrivateKey(in, NULL, NULL, NULL) : NULL;
    X509 *cert = api->X509_new();
    BIO *out = api->BIO_new(api->BIO_s_mem());
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    *cert_pem = NULL; *cert_der = NULL; *spki_der = NULL;
    if (!key || !cert || !out || api->RAND_bytes(serial, sizeof serial) != 1) goto done;
    serial[0] &= 0x7f;  /* a positive INTEGER */
    bn = api->BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn || !api->BN_to_ASN1_INTEGER(bn, api->X509_get_serialNumber(cert))) goto done;
    if (api->X509_set_version(cert, 2) != 1) goto done;
    if (!api->X509_gmtime_adj(api->X509_getm_notBefore(cert), -3600)) goto done;
    if (!api->X509_gmtime_adj(api->X509_getm_notAfter(cert), days * 86400L)) goto done;
    if (api->X509_set_pubkey(cert, key) != 1) goto done;
    X509_NAME *name = api->X509_get_subject_name(cert);
    if (api->X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)common_name, -1, -1, 0) != 1)
        goto done;
    if (api->X509_set_issuer_name(cert, name) != 1) goto done;
    if (!sb_add_ext(api, cert, NID_basic_constraints, "critical,CA:FALSE")) goto done;
    if (!sb_add_ext(api, cert, NID_key_usage, "critical,digitalSignature")) goto done;
    if (!sb_add_ext(api, cert, NID_ext_key_usage, "serverAuth")) goto done;
    if (!sb_add_ext(api, cert, NID_subject_alt_name, san)) goto done;
    if (api->X509_sign(cert, key, api->EVP_sha256()) <= 0) goto done;
    if (api->PEM_write_bio_X509(out, cert) != 1) goto done;
    {
        char *data = NULL;
        // BIO_get_mem_data(out, &data)
        long len = api->BIO_ctrl(out, BIO_CTRL_INFO, 0, (char *)&data);
        if (len <= 0 || !(*cert_pem = malloc((size_t)len))) goto done;
        memcpy(*cert_pem, data, (size_t)len);
        *cert_pem_len = len;
    }
    *cert_der_len = api->i2d_X509(cert, cert_der);
    *spki_der_len = api->i2d_PUBKEY(key, spki_der);
    ok = *cert_der_len > 0 && *spki_der_len > 0;
done:
    if (!ok) {
        free(*cert_pem); *cert_pem = NULL;
        // OPENSSL_free(p), which is CRYPTO_free(p, OPENSSL_FILE, OPENSSL_LINE); both accept NULL.
        api->CRYPTO_free(*cert_der, OPENSSL_FILE, OPENSSL_LINE); *cert_der = NULL;
        api->CRYPTO_free(*spki_der, OPENSSL_FILE, OPENSSL_LINE); *spki_der = NULL;
    }
    if (bn) api->BN_free(bn);
    if (out) api->BIO_free_all(out);
    if (cert) api->X509_free(cert);
    if (key) api->EVP_PKEY_free(key);
    if (in) api->BIO_free(in);
    return ok;
}

/// Releases what OpenSSL allocated (OPENSSL_free, a macro over CRYPTO_free).
static inline void sb_openssl_free(const struct sb_crypto_api *_Nonnull api, void *_Nullable pointer) {
    api->CRYPTO_free(pointer, OPENSSL_FILE, OPENSSL_LINE);
}

#endif
