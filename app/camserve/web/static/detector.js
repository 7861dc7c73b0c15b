// What the page keeps of a detector's answers for the image, and which request (if any) a view
// of it still needs.
//
// Every box the page draws comes with its heatmaps already: the request asks /v1/explain for
// the first `max_detections` detections (as many as the page draws), so choosing a box repaints
// from kept maps with no request at all. The server explains those detections from one forward
// pass, re-running only the box head on the explained rows (its goal: ten detections for at
// most 1.5 times the forward alone), whereas asking for each box when it is chosen
// (box=&target=) would cost a whole forward pass per click.
//
// A detector lists its detections best first, and a box above a higher threshold is above a
// lower one too (the threshold only cuts the list; the non-maximum suppression keeps the same
// boxes above it), so raising the score threshold or drawing fewer boxes needs no request either.

/** Key of a kept map: a class-agnostic map (Eigen-CAM) stands for every detection. */
const ANY_DETECTION = '*';

export class DetectorAnswers {
  constructor() {
    this.reset();
  }

  /** Forget everything (another image, model or layer). */
  reset() {
    this.threshold = null; // the score threshold the kept detections were listed at
    this.detections = []; // /v1/explain's `detections` at that threshold
    this.maps = new Map(); // `${method}|${detection index}` → {entry, heatmap}
  }

  /** The kept detections scoring above `threshold`, best first. */
  above(threshold) {
    return this.detections.filter((detection) => detection.score > threshold);
  }

  /** The detections a view {threshold, cap} draws: at most `cap` of those above `threshold`. */
  shown({ threshold, cap }) {
    return this.above(threshold).slice(0, cap);
  }

  /** What the list of detections says about a view {threshold, cap}. */
  note(view) {
    const above = `scoring above ${view.threshold.toFixed(2)}`;
    const total = this.above(view.threshold).length;
    if (total === 0) return `No detection ${above}: lower the score threshold to see more.`;
    const count = Math.min(total, view.cap);
    const drawn = count < total ? `The best ${count} of ${total} detections` : `${count} ${plural(count)}`;
    return `${drawn} ${above}; choose one to see its heatmap.`;
  }

  mapFor(method, detectionIndex) {
    return this.maps.get(`${method}|${detectionIndex}`) ?? this.maps.get(`${method}|${ANY_DETECTION}`);
  }

  /** The kept map of `method` for `detection`; a class-agnostic one (Eigen-CAM: one for every
   * detection) named after that detection. */
  namedMap(method, detection) {
    const explained = this.mapFor(method, detection.index);
    if (!explained?.entry.class_agnostic) return explained;
    const { index, class_index: classIndex, label, score } = detection;
    const named = { detection: index, class_index: classIndex, label, probability: score };
    return { ...explained, entry: { ...explained.entry, ...named } };
  }

  /**
   * The request the view {threshold, cap, methods} still needs, as {threshold, cap, methods},
   * or null when the kept answers cover it. A lower threshold than the kept one lists anew
   * (every chosen method); otherwise only the methods some drawn box lacks are asked for, at the
   * kept threshold so that the detections' indices stay the same.
   */
  needed(view) {
    if (this.threshold === null || view.threshold < this.threshold) {
      return { threshold: view.threshold, cap: view.cap, methods: view.methods, fresh: true };
    }
    const shown = this.shown(view);
    const lacking = view.methods.filter((method) =>
      shown.some((detection) => this.mapFor(method, detection.index) === undefined),
    );
    if (lacking.length === 0) return null;
    const cap = Math.max(...shown.map((detection) => detection.index)) + 1;
    return { threshold: this.threshold, cap, methods: lacking, fresh: false };
  }

  /**
   * Keep `response` (the answer to `request`, from `needed`) and its decoded explanations. An
   * answer that lists other detections than the kept ones (it should not) replaces them all.
   */
  keep(request, response, explained) {
    if (request.fresh || !sameDetections(this.detections, response.detections)) {
      this.maps.clear();
      this.threshold = request.threshold;
      this.detections = response.detections;
    }
    for (const item of explained) {
      const { method, detection, class_agnostic: agnostic } = item.entry;
      this.maps.set(`${method}|${agnostic ? ANY_DETECTION : detection}`, item);
    }
  }
}

function plural(count) {
  return count === 1 ? 'detection' : 'detections';
}

function sameDetections(kept, listed) {
  return JSON.stringify(kept) === JSON.stringify(listed);
}
