// #sb-log: one element per chunk (newest first on screen), the last 500 kept, each with data-state
// queued | sent | delivered | held and, when held, the reason.
const KEEP = 500;

export class Log {
  constructor(list) { this.list = list; this.items = new Map(); }

  update(chunk, state, detail = '', { unlessHeld = false } = {}) {
    let item = this.items.get(chunk.seq);
    if (!item) {
      item = document.createElement('li');
      item.dataset.seq = String(chunk.seq);
      const text = document.createElement('span');
      text.className = 'text';
      text.textContent = chunk.text;
      const badge = document.createElement('span');
      badge.className = 'state';
      item.append(text, badge);
      this.list.append(item);
      this.items.set(chunk.seq, item);
      while (this.items.size > KEEP) {
        const [oldest, element] = this.items.entries().next().value;
        element.remove();
        this.items.delete(oldest);
      }
    }
    // A delivered chunk stays delivered (a late 'sent' from the send chain does not take it back).
    if (item.dataset.state === 'delivered') return;
    if (unlessHeld && item.dataset.state === 'held') return;
    item.dataset.state = state;
    item.querySelector('.state').textContent = state;
    let reason = item.querySelector('.reason');
    if (state === 'held' && detail) {
      if (!reason) {
        reason = document.createElement('span');
        reason.className = 'reason';
        item.querySelector('.text').append(reason);
      }
      reason.textContent = detail;
    } else if (reason) {
      reason.remove();
    }
  }

  clear() { this.list.replaceChildren(); this.items.clear(); }
}
