// The pairing code parser of Pairing/PROTOCOL.md ("Pairing code", "Parsing"), step for step, with the same error
// names as the reference implementation and the vectors (Pairing/vectors/pairing-codes.json).

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export class PairingCodeError extends Error {
  constructor(code, position) {
    super(position ? `${code} at ${position}` : code);
    this.code = code;
    this.position = position;
  }
}

let crcTable = null;
export function crc32(bytes) {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const b of bytes) crc = crcTable[(crc ^ b) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function symbolValue(ch) {
  const c = ch.toUpperCase();
  if (c === 'O') return 0;
  if (c === 'I' || c === 'L') return 1;
  const v = ALPHABET.indexOf(c);
  return v >= 0 && c.length === 1 ? v : -1;
}

function checksumOK(bytes, end) {
  const crc = crc32(bytes.subarray(0, end - 4));
  const stored = ((bytes[end - 4] << 24) | (bytes[end - 3] << 16) | (bytes[end - 2] << 8) | bytes[end - 1]) >>> 0;
  return crc === stored;
}

function possibleLength(n) {
  for (let a = 0; a <= 8; a++) for (let b = 0; a + b <= 8; b++) if (77 + 5 * a + 17 * b === n) return true;
  return false;
}

/** The declared end of the payload read without checks (rule 5.2), or null when the rule does not apply. */
function declaredEnd(bytes) {
  if (bytes.length <= 72) return Infinity;
  const count = bytes[72];
  if (count > 8) return null;
  let offset = 73;
  for (let i = 0; i < count; i++) {
    if (offset >= bytes.length) return Infinity;
    const family = bytes[offset];
    if (family === 4) offset += 5; else if (family === 6) offset += 17; else return null;
  }
  return offset + 4;
}

function parsePayload(p) {
  if (p[0] !== 1) throw new PairingCodeError('unsupportedVersion');
  if (p[1] !== 0) throw new PairingCodeError('unknownFlags');
  if (p.length < 73) throw new PairingCodeError('truncated');
  const view = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const desktopKey = p.slice(2, 34);
  const secret = p.slice(34, 66);
  const expiry = view.getUint32(66, false);
  const port = view.getUint16(70, false);
  const count = p[72];
  if (count > 8) throw new PairingCodeError('tooManyAddresses');
  const addresses = [];
  let offset = 73;
  for (let i = 0; i < count; i++) {
    if (offset >= p.length) throw new PairingCodeError('truncated');
    const family = p[offset];
    if (family === 4) {
      if (offset + 5 > p.length) throw new PairingCodeError('truncated');
      addresses.push(Array.from(p.subarray(offset + 1, offset + 5)).join('.'));
      offset += 5;
    } else if (family === 6) {
      if (offset + 17 > p.length) throw new PairingCodeError('truncated');
      const groups = [];
      for (let g = 0; g < 8; g++) groups.push(view.getUint16(offset + 1 + 2 * g, false).toString(16));
      addresses.push(groups.join(':'));
      offset += 17;
    } else {
      throw new PairingCodeError('invalidAddressFamily');
    }
  }
  if (offset !== p.length) throw new PairingCodeError('trailingBytes');
  return { version: 1, flags: 0, desktopKey, secret, expiry, port, addresses };
}

/** Parses a code (steps 1–5 of PROTOCOL.md); throws PairingCodeError. `now` (Unix seconds) adds the expiry check. */
export function parsePairingCode(text, now = null) {
  let i = 0;
  while (i < text.length && ' \t\r\n'.includes(text[i])) i++;
  const head = /^[Ss][Bb]([0-9]+):/.exec(text.slice(i));
  if (!head) throw new PairingCodeError('missingPrefix');
  const digits = head[1];
  if (digits !== '1') {
    if (digits.length <= 3 && (digits[0] !== '0' || digits === '0')) throw new PairingCodeError('unsupportedVersion');
    throw new PairingCodeError('missingPrefix');
  }
  const start = i + head[0].length;
  const bytes = [];
  let acc = 0;
  let bits = 0;
  let lastSymbolPosition = 0;
  // Positions count characters (code points) of the whole text from 1.
  const chars = Array.from(text);
  let position = Array.from(text.slice(0, start)).length;
  for (const ch of chars.slice(position)) {
    position++;
    if (' \t\r\n-'.includes(ch)) continue;
    const v = symbolValue(ch);
    if (v < 0) throw new PairingCodeError('invalidCharacter', position);
    lastSymbolPosition = position;
    acc = (acc << 5) | v;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes.push((acc >>> bits) & 0xff);
      acc &= (1 << bits) - 1;
    }
  }
  const data = Uint8Array.from(bytes);
  if (data.length < 77) throw new PairingCodeError('truncated');
  if (checksumOK(data, data.length)) {
    if (bits >= 5) throw new PairingCodeError('trailingBytes');
    if (acc !== 0) throw new PairingCodeError('invalidCharacter', lastSymbolPosition);
    const code = parsePayload(data.subarray(0, data.length - 4));
    if (now !== null && !(now < code.expiry)) {
      const error = new PairingCodeError('expired');
      error.expiry = code.expiry;
      throw error;
    }
    return code;
  }
  for (let end = 77; end < data.length; end++) {
    if (checksumOK(data, end)) throw new PairingCodeError('trailingBytes');
  }
  const declared = declaredEnd(data);
  if (!possibleLength(data.length) && declared !== null && declared > data.length) {
    throw new PairingCodeError('truncated');
  }
  throw new PairingCodeError('checksumMismatch');
}

/** What a person should read for each error: what happened and what to do. */
export function describePairingError(error, now = Date.now() / 1000) {
  switch (error.code) {
    case 'expired': {
      const ago = Math.max(0, Math.round(now - error.expiry));
      return `This pairing code expired ${ago} s ago (codes last 2 minutes). On the desktop, run ` +
        '"speakbridge pair --web" again and scan the new code. (If the phone\'s clock is wrong, fix it first.)';
    }
    case 'unsupportedVersion':
      return 'This code is for another SpeakBridge version. Update the desktop or use its page.';
    case 'checksumMismatch': case 'truncated': case 'trailingBytes': case 'invalidCharacter':
      return 'The pairing code in this address is damaged. Scan the QR again.';
    default:
      return 'This address does not hold a SpeakBridge pairing code. Scan the QR that "speakbridge pair --web" shows.';
  }
}
