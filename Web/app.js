// The page: pairs through the code in the URL fragment, then sends dictation to the desktop.
//
// Flow:
// 1. Open IndexedDB; load or make the device's static key (X25519, private half non-extractable).
// 2. A code in the fragment (#SB1:…): parsed (PROTOCOL.md rules; an expired code is refused with a clear message).
//    If this page is already paired with that desktop through that very code, the code is skipped (a reload of
//    the QR's URL); otherwise the page pairs with it. The fragment is then removed from the address bar.
// 3. Paired: a Sender keeps the session (outbox in IndexedDB, resume, acks, reconnects); the text box sends on
//    Enter or after a pause; the microphone uses the Web Speech API (continuous, interim words greyed, each final
//    result one chunk with its start/end and language); a screen wake lock keeps the phone awake while paired.
import { Store } from './store.js';
import { generateKeyPair, publicBytes, hex } from './noise.js';
import { parsePairingCode, describePairingError, PairingCodeError } from './pairing-code.js';
import { pair, PairingError } from './protocol.js';
import { Sender, newSession } from './sender.js';
import { Log } from './log.js';
import { Dictation } from './dictation.js';

const $ = (id) => document.getElementById(id);
const ui = {
  status: $('sb-status'), message: $('sb-message'), mic: $('sb-mic'), interim: $('sb-interim'),
  form: $('sb-form'), text: $('sb-text'), send: $('sb-send'), device: $('sb-device'),
};
const log = new Log($('sb-log'));
const PAUSE_SEND_MS = 4000;
let sender = null;
let desktopName = '';
let wakeLock = null;

function setStatus(state, text) {
  ui.status.dataset.state = state;
  ui.status.textContent = text;
}

function showMessage(text, kind = 'error') {
  ui.message.hidden = !text;
  // Quoted commands become <code> (kept on one line); everything is text, never HTML.
  ui.message.replaceChildren(...(text || '').split(/"([^"]+)"/).map((part, i) => {
    if (i % 2 === 0) return document.createTextNode(part);
    const code = document.createElement('code');
    code.textContent = part;
    return code;
  }));
  ui.message.className = `message ${kind === 'info' ? 'info' : ''}`;
}

function enableInput(on) {
  ui.text.disabled = !on;
  ui.send.disabled = !on;
  ui.mic.disabled = !on || !Dictation.supported();
}

function shortAgent() {
  const ua = navigator.userAgent;
  const m = /(Firefox|Edg|Chrome|Version)\/(\d+)/.exec(ua);
  return (`speakbridge-web/1 ${m ? `${m[1] === 'Version' ? 'Safari' : m[1]}/${m[2]}` : ''}`).trim().slice(0, 128);
}

async function staticKeys(store) {
  let keys = await store.get('keys', 'static');
  if (!keys) {
    keys = await generateKeyPair(false);
    await store.put('keys', 'static', keys);
  }
  return keys;
}

async function sha256Hex(bytes) {
  return hex(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)));
}

async function requestWakeLock() {
  if (!('wakeLock' in navigator) || document.visibilityState !== 'visible' || wakeLock) return;
  try {
    wakeLock = await navigator.wakeLock.request('screen');
    wakeLock.addEventListener('release', () => { wakeLock = null; });
  } catch { /* not allowed now (battery saver, no gesture yet): tried again on the next visibility change */ }
}

function connectionText(state, detail) {
  switch (state) {
    case 'connected': return `paired with ${desktopName} · connected`;
    case 'connecting': return `paired with ${desktopName} · connecting…`;
    case 'reconnecting': return `paired with ${desktopName} · reconnecting… (lines wait on this phone)`;
    case 'refused': return `paired with ${desktopName} · the desktop does not answer this device ` +
      '(is it running? was this device revoked?) — retrying';
    case 'error': return `paired with ${desktopName} · the desktop reported: ${detail}`;
    default: return `paired with ${desktopName}`;
  }
}

function revoked(reason) {
  setStatus('revoked', `revoked: ${reason}. This page sends nothing more.`);
  showMessage('This device was revoked on the desktop. Lines typed here are not sent. To use this phone again, ' +
    'run "speakbridge pair --web" on the desktop and scan the new code.');
  enableInput(false);
  dictation.stop();
}

async function startSession(store, keys, desktop) {
  desktopName = desktop.name || desktop.id || 'the desktop';
  let session = await store.loadSession();
  if (!session) {
    session = newSession();
    await store.put('state', 'session', { id: session.id, startedAt: session.startedAt });
  }
  sender = new Sender({
    store, desktop, keys, session, agent: shortAgent(),
    events: {
      onChunkState: (chunk, state, detail, options) => log.update(chunk, state, detail, options),
      onConnection: (state, detail) => setStatus(state, connectionText(state, detail)),
      onRevoked: async (reason) => {
        await store.put('state', 'revoked', true);
        revoked(reason);
      },
    },
  });
  setStatus('connecting', connectionText('connecting'));
  enableInput(true);
  ui.device.textContent = `This phone: ${desktop.clientID || ''} · desktop ${desktop.id || ''}`;
  await sender.start();
  requestWakeLock();
}

async function pairWith(store, keys, code, codeHash) {
  setStatus('pairing', 'Pairing with the desktop…');
  showMessage('');
  try {
    const result = await pair({ code, keys, name: 'browser' });
    const clientID = await deviceID(keys);
    const desktop = { key: code.desktopKey, psk: result.psk, name: result.name, id: result.id, codeHash, clientID };
    await store.paired(desktop, newSession());
    log.clear();
    return desktop;
  } catch (error) {
    const kind = error instanceof PairingError ? error.kind : 'protocol';
    const text = {
      inactive: 'The desktop did not accept this code: it was already used, it expired, or a newer code replaced it. ' +
        'On the desktop, run "speakbridge pair --web" again and scan the new code.',
      refused: 'The desktop did not accept this code: it was already used, it expired, or a newer code replaced it. ' +
        'On the desktop, run "speakbridge pair --web" again and scan the new code.',
      impostor: 'The desktop\'s answer did not verify: this is not the desktop that showed the code. Nothing was sent.',
      timeout: 'The desktop did not answer. Check that the phone is on the same network, then scan the code again.',
      unreachable: 'The desktop could not be reached. Check that the phone is on the same network.',
    }[kind] || `Pairing failed: ${error.message}`;
    setStatus('error', 'Not connected: pairing failed.');
    showMessage(text);
    return null;
  }
}

/** The device ID of our static key (PROTOCOL.md "Identity"): first 10 bytes of SHA-256, Crockford base32. */
async function deviceID(keys) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', await publicBytes(keys)));
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  let bits = 0; let acc = 0; let out = '';
  for (const b of digest.subarray(0, 10)) {
    acc = (acc << 8) | b; bits += 8;
    while (bits >= 5) { bits -= 5; out += alphabet[(acc >>> bits) & 31]; }
    acc &= (1 << bits) - 1;
  }
  return out.match(/.{4}/g).join('-');
}

const dictation = new Dictation({
  onInterim: (text) => { ui.interim.textContent = text; },
  onFinal: ({ text, lang, startMs, endMs }) => {
    ui.interim.textContent = '';
    if (sender && text.trim()) {
      sender.add({ text: text.trim(), lang, start: sender.elapsed(startMs), end: sender.elapsed(endMs) }).catch(() => {});
    }
  },
  onState: (listening, problem) => {
    ui.mic.setAttribute('aria-pressed', String(listening));
    ui.mic.querySelector('.label').textContent = listening ? 'Listening… tap to stop' : 'Start dictating';
    if (problem) showMessage(problem, 'info');
  },
});

function wireInput() {
  let pauseTimer = null;
  const sendText = () => {
    clearTimeout(pauseTimer);
    const text = ui.text.value;
    if (!sender || ui.text.disabled) return;
    ui.text.value = '';
    for (const line of text.split(/\r?\n/)) {
      if (line.trim()) {
        sender.add({ text: line, lang: navigator.language, start: sender.elapsed(), end: sender.elapsed() })
          .catch(() => {});
      }
    }
  };
  ui.form.addEventListener('submit', (event) => { event.preventDefault(); sendText(); });
  ui.text.addEventListener('input', () => {
    // Text dictated with the keyboard's own mic has no Enter: send it after a pause.
    clearTimeout(pauseTimer);
    if (ui.text.value.trim()) pauseTimer = setTimeout(sendText, PAUSE_SEND_MS);
  });
  ui.mic.addEventListener('click', () => {
    requestWakeLock();
    if (dictation.listening) dictation.stop(); else dictation.start(navigator.language);
  });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && sender) requestWakeLock();
  });
}

/** Takes the page-wide lock for the lifetime of this page; false when another tab holds it. */
function holdSenderLock() {
  return new Promise((resolve) => {
    navigator.locks.request('speakbridge-sender', { ifAvailable: true }, (lock) => {
      resolve(lock !== null);
      return lock ? new Promise(() => {}) : undefined; // held until the page goes away
    });
  });
}

async function main() {
  wireInput();
  if (!window.isSecureContext || !crypto.subtle) {
    setStatus('error', 'This page needs HTTPS.');
    return;
  }
  // One page per browser: a second tab would number chunks of the same session twice (or re-pair under it).
  if (navigator.locks && !(await holdSenderLock())) {
    setStatus('error', 'SpeakBridge is open in another tab of this browser: close this one and use that one.');
    return;
  }
  const store = await Store.open();
  const keys = await staticKeys(store);
  const fragment = decodeURIComponent(location.hash.replace(/^#/, ''));
  let desktop = await store.get('state', 'desktop');
  let isRevoked = (await store.get('state', 'revoked')) === true;
  for (const chunk of await store.outbox()) log.update(chunk, 'queued');

  if (fragment) {
    let code = null;
    try {
      code = parsePairingCode(fragment, Math.floor(Date.now() / 1000));
    } catch (error) {
      if (!(error instanceof PairingCodeError)) throw error;
      if (!(error.code === 'expired' && desktop && !isRevoked)) {
        setStatus('error', error.code === 'expired' ? 'This pairing code expired.' : 'This is not a valid pairing code.');
        showMessage(describePairingError(error));
        history.replaceState(null, '', location.pathname);
        if (!desktop || isRevoked) return;
      }
    }
    if (code) {
      const codeHash = await sha256Hex(code.secret);
      const sameCode = desktop && !isRevoked && desktop.codeHash === codeHash;
      if (!sameCode) {
        const paired = await pairWith(store, keys, code, codeHash);
        if (paired) { desktop = paired; isRevoked = false; } else if (!desktop || isRevoked) {
          history.replaceState(null, '', location.pathname);
          return;
        }
      }
    }
    history.replaceState(null, '', location.pathname);
  }
  if (isRevoked) {
    revoked('the desktop revoked this device');
    return;
  }
  if (!desktop) {
    setStatus('idle', 'No desktop yet.');
    showMessage('On the desktop, run "speakbridge pair --web" and scan its QR code with this phone\'s camera.', 'info');
    return;
  }
  await startSession(store, keys, desktop);
}

main().catch((error) => {
  setStatus('error', `Something went wrong: ${error.message || error}`);
});
