// Follows the explanation report of the chosen model (GET /v1/models/{name}/report): asked for
// once per model version, and again every few seconds while the server still computes it
// (queued, running), until it is ready, failed or unsupported. A server whose reports are off
// (404 reports_off) is not asked again. Reports are a convenience: no failure here is the page's
// error, and a call that failed (the server restarting, a key still missing) is tried again the
// next time the model or layer is shown.

const POLL_MS = 4000;
const SETTLED = new Set(['ready', 'failed', 'unsupported']);

export class ReportWatch {
  /**
   * `fetchReport(name, signal)` answers the route's JSON body (rejecting with the API's error);
   * `onReport(body)` hears each answer of the model being followed (null: nothing to show).
   */
  constructor(fetchReport, onReport) {
    this.fetchReport = fetchReport;
    this.onReport = onReport;
    this.bodies = new Map(); // `name@version` → the latest body
    this.off = false; // the server said its reports are off
    this.key = '';
    this.request = null; // AbortController of the call under way
    this.timer = 0;
  }

  /** Follow `model` (an entry of GET /v1/models, or null); returns the body known for it, or null. */
  follow(model) {
    const key = model && !this.off ? `${model.name}@${model.model_version}` : '';
    if (key !== this.key) this.stop();
    this.key = key;
    const known = this.bodies.get(key) ?? null;
    if (key && !SETTLED.has(known?.state) && !this.request && !this.timer) this.ask(model.name, key);
    return known;
  }

  stop() {
    this.request?.abort();
    this.request = null;
    clearTimeout(this.timer);
    this.timer = 0;
  }

  async ask(name, key) {
    const request = new AbortController();
    this.request = request;
    try {
      const body = await this.fetchReport(name, request.signal);
      if (key !== this.key) return;
      this.bodies.set(key, body);
      if (!SETTLED.has(body.state)) this.timer = setTimeout(() => this.poll(name, key), POLL_MS);
    } catch (error) {
      if (request.signal.aborted) return;
      if (error.code === 'reports_off') this.off = true;
    } finally {
      if (this.request === request) this.request = null;
    }
    if (key === this.key) this.onReport(this.off ? null : (this.bodies.get(key) ?? null));
  }

  poll(name, key) {
    this.timer = 0;
    if (key === this.key) this.ask(name, key);
  }
}
