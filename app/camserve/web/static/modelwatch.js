// Follows the server's models while the page stays open. A server whose models can change
// (model control `explicit` or `poll`) is listed again every few seconds while the page is
// visible, at once when it is shown again, and whenever an answer names a model version the
// page has not listed; the page is told what changed: models added, removed or reloaded.

const EXPLICIT_WATCH_MS = 5000;
const MIN_WATCH_MS = 2000;

/** How often to list a server whose listing is `listing` again (0: its models never change). */
export function watchInterval(listing) {
  if (listing.model_control === 'poll') return Math.max(MIN_WATCH_MS, listing.poll_interval_s * 1000);
  if (listing.model_control === 'explicit') return EXPLICIT_WATCH_MS;
  return 0;
}

/**
 * What changed from the listing `before` to `after`: {added, removed, reloaded, failedChanged},
 * `reloaded` as [{name, from, to}] versions; null when nothing did.
 */
export function modelChanges(before, after) {
  const versions = (listing) => new Map(listing.models.map((model) => [model.name, model.model_version]));
  const old = versions(before);
  const now = versions(after);
  const added = [...now.keys()].filter((name) => !old.has(name));
  const removed = [...old.keys()].filter((name) => !now.has(name));
  const reloaded = [...now.entries()]
    .filter(([name, version]) => old.has(name) && old.get(name) !== version)
    .map(([name, version]) => ({ name, from: old.get(name), to: version }));
  const failedChanged = JSON.stringify(before.failed ?? {}) !== JSON.stringify(after.failed ?? {});
  if (!added.length && !removed.length && !reloaded.length && !failedChanged) return null;
  return { added, removed, reloaded, failedChanged };
}

/** One sentence for the changes a user should hear of (empty when only failures changed). */
export function describeChanges({ added, removed, reloaded }) {
  const parts = [];
  if (added.length) parts.push(`Now served: ${added.join(', ')}.`);
  if (removed.length) parts.push(`No longer served: ${removed.join(', ')}.`);
  for (const { name, from, to } of reloaded) parts.push(`${name} was reloaded (version ${from} → ${to}).`);
  return parts.join(' ');
}

export class ModelWatch {
  /**
   * `list(signal)` fetches GET /v1/models; `onChange(listing, changes)` hears of each listing
   * that differs from the one before it.
   */
  constructor(list, onChange) {
    this.list = list;
    this.onChange = onChange;
    this.listing = null;
    this.timer = 0;
    this.request = null;
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible' && this.interval()) this.check();
    });
  }

  /** The listing the page shows now (from its own first call). */
  follow(listing) {
    this.listing = listing;
    this.schedule();
  }

  /** An answer of `model` computed by `version`: list again when the page does not know it. */
  noteVersion(model, version) {
    const known = this.listing?.models.find((entry) => entry.name === model);
    if (this.listing && version && known?.model_version !== version) this.check();
  }

  interval() {
    return this.listing ? watchInterval(this.listing) : 0;
  }

  schedule() {
    clearTimeout(this.timer);
    const every = this.interval();
    if (every) this.timer = setTimeout(() => this.check(), every);
  }

  async check() {
    this.request?.abort();
    const request = new AbortController();
    this.request = request;
    try {
      const listing = await this.list(request.signal);
      const changes = this.listing ? modelChanges(this.listing, listing) : null;
      this.listing = listing;
      if (changes) this.onChange(listing, changes);
    } catch {
      // A server that is restarting or briefly unreachable: the next turn lists again.
    } finally {
      if (this.request === request) this.schedule();
    }
  }
}
