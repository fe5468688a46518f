// COpenSSL: the one header SpeakBridgeTLS imports — OpenSSL's C API (the library libwebsockets already links for
// TLS), for the desktop's self-signed web certificate.
//
// The helpers below exist because Swift cannot reach what they wrap: EVP_EC_gen is a macro, X509V3_set_ctx_nodb
// is a macro, and the OpenSSL stack/ASN.1 plumbing is far clearer as a few lines of C than as pointer juggling in
// Swift. Each returns 1 on success, 0 on failure, and frees everything it made on every path.
#ifndef SPEAKBRIDGE_COPENSSL_SHIM_H
#define SPEAKBRIDGE_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

/// A fresh ECDSA P-256 key as PKCS#8 PEM (malloc'd into *pem / *pem_len; the caller wipes and frees it).
static inline int sb_ec_key_pem(char **pem, long *pem_len) {
    int ok = 0;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    BIO *bio = BIO_new(BIO_s_mem());
    if (key && bio && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        char *data = NULL;
        long len = BIO_get_mem_data(bio, &data);
        *pem = malloc((size_t)len);
        if (*pem && len > 0) { memcpy(*pem, data, (size_t)len); *pem_len = len; ok = 1; }
    }
    BIO_free_all(bio);
    EVP_PKEY_free(key);
    return ok;
}

/// Appends one X509v3 extension given in OpenSSL's config syntax.
static inline int sb_add_ext(X509 *cert, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) return 0;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1;
}

/// A self-signed certificate for the key in `key_pem`: subject CN = `common_name`, subjectAltName = `san`
/// (e.g. "IP:192.0.2.10,IP:127.0.0.1"), valid from an hour ago for `days` days, serverAuth, signed with
/// ECDSA-SHA256. Outputs the PEM certificate, its DER form and the DER SubjectPublicKeyInfo (all malloc'd).
static inline int sb_self_signed(const char *key_pem, long key_len, const char *common_name, const char *san,
                                 long days, char **cert_pem, long *cert_pem_len,
                                 unsigned char **cert_der, int *cert_der_len,
                                 unsigned char **spki_der, int *spki_der_len) {
    int ok = 0;
    BIO *in = BIO_new_mem_buf(key_pem, (int)key_len);
    EVP_PKEY *key = in ? PEM_read_bio_PrivateKey(in, NULL, NULL, NULL) : NULL;
    X509 *cert = X509_new();
    BIO *out = BIO_new(BIO_s_mem());
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    *cert_pem = NULL; *cert_der = NULL; *spki_der = NULL;
    if (!key || !cert || !out || RAND_bytes(serial, sizeof serial) != 1) goto done;
    serial[0] &= 0x7f;  /* a positive INTEGER */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert))) goto done;
    if (X509_set_version(cert, 2) != 1) goto done;
    if (!X509_gmtime_adj(X509_getm_notBefore(cert), -3600)) goto done;
    if (!X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400L)) goto done;
    if (X509_set_pubkey(cert, key) != 1) goto done;
    X509_NAME *name = X509_get_subject_name(cert);
    if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)common_name, -1, -1, 0) != 1)
        goto done;
    if (X509_set_issuer_name(cert, name) != 1) goto done;
    if (!sb_add_ext(cert, NID_basic_constraints, "critical,CA:FALSE")) goto done;
    if (!sb_add_ext(cert, NID_key_usage, "critical,digitalSignature")) goto done;
    if (!sb_add_ext(cert, NID_ext_key_usage, "serverAuth")) goto done;
    if (!sb_add_ext(cert, NID_subject_alt_name, san)) goto done;
    if (X509_sign(cert, key, EVP_sha256()) <= 0) goto done;
    if (PEM_write_bio_X509(out, cert) != 1) goto done;
    {
        char *data = NULL;
        long len = BIO_get_mem_data(out, &data);
        if (len <= 0 || !(*cert_pem = malloc((size_t)len))) goto done;
        memcpy(*cert_pem, data, (size_t)len);
        *cert_pem_len = len;
    }
    *cert_der_len = i2d_X509(cert, cert_der);
    *spki_der_len = i2d_PUBKEY(key, spki_der);
    ok = *cert_der_len > 0 && *spki_der_len > 0;
done:
    if (!ok) {
        free(*cert_pem); *cert_pem = NULL;
        OPENSSL_free(*cert_der); *cert_der = NULL;
        OPENSSL_free(*spki_der); *spki_der = NULL;
    }
    BN_free(bn);
    BIO_free_all(out);
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(in);
    return ok;
}

/// Releases what OpenSSL allocated (OPENSSL_free is a macro).
static inline void sb_openssl_free(void *pointer) { OPENSSL_free(pointer); }

#endif
