/// How a secret is shown when it is not revealed: a short recognisable prefix and the last four characters,
/// like `dg_…9f3a` or `sk-…41c2`. Never more than 7 characters of the secret, and nothing of a short one.
public enum SecretMask {
    /// Shortest secret of which anything is shown; shorter ones are `…` plus their length.
    public static let minimumLengthToHint = 16

    public static func mask(_ secret: String) -> String {
        let chars = Array(secret)
        guard chars.count >= minimumLengthToHint else { return "…(\(chars.count) chars)" }
        // A vendor prefix up to and including a separator in the first three characters (`dg_`, `sk-`),
        // else the first two characters.
        var prefixCount = 2
        if let sep = chars.prefix(3).firstIndex(where: { $0 == "_" || $0 == "-" }) { prefixCount = sep + 1 }
        return String(chars.prefix(prefixCount)) + "…" + String(chars.suffix(4))
    }
}
