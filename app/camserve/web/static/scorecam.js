// Score-CAM's expected time on the page. The server measures each classifier's masked-pass time
// when it loads and lists, per layer, the seconds one image takes with every channel
// (`score_cam_seconds` in GET /v1/models); it refuses at once a request whose estimate exceeds
// its deadline (`request_timeout_s`). The page shows the estimate beside the method and, where
// it exceeds the deadline, does not offer Score-CAM, naming a layer that would fit.

const METHOD = 'scorecam';
// The share of the deadline a suggested layer should stay under (the estimate is not exact):
// the server suggests layers by the same margin.
const FIT_MARGIN = 0.8;

/** `seconds` as people read a rough time: "0.4 s", "7.3 s", "21 s", "3 min". */
export function roughTime(seconds) {
  if (seconds < 0.05) return 'under 0.1 s';
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 120) return `${Math.round(seconds)} s`;
  return `${Math.round(seconds / 60)} min`;
}

/**
 * Score-CAM's cost for one image at `layer` of `model` under `deadline` seconds (null when not
 * known): {seconds, fits, note, title}. Null for any other method, and where the model lists no
 * estimate for the layer (detectors and segmenters list none), so the page offers the method
 * as before.
 */
export function scoreCamCost(model, layer, method, deadline) {
  const seconds = estimate(model, layer);
  if (method !== METHOD || seconds === undefined) return null;
  const where = `for one image at layer ${layer}`;
  const time = `about ${roughTime(seconds)}`;
  if (typeof deadline !== 'number' || seconds <= deadline) {
    const limit = typeof deadline === 'number' ? `, within its ${deadline} s limit per request` : '';
    return {
      seconds,
      fits: true,
      note: `· ${time}`,
      title: `Score-CAM takes ${time} ${where} on this server (${model.device})${limit}.`,
    };
  }
  return {
    seconds,
    fits: false,
    note: `· ${time}, over the ${deadline} s limit`,
    title: `Score-CAM needs ${time} ${where}, over this server's ${deadline} s limit per request: ${whatFits(model, deadline)}.`,
  };
}

/** The model's estimate at `layer` in seconds, or undefined. */
function estimate(model, layer) {
  const seconds = model?.score_cam_seconds?.[layer];
  return typeof seconds === 'number' ? seconds : undefined;
}

/** Which layer to choose instead: the one with the most detail (the longest estimate) that fits
 * with some margin, else one that fits at all; else what else would help. */
function whatFits(model, deadline) {
  const layers = [...new Set([model.default_layer, ...(model.candidate_layers ?? [])])];
  const timed = layers.filter((layer) => estimate(model, layer) !== undefined);
  const fitting = timed.filter((layer) => estimate(model, layer) <= deadline);
  const comfortable = fitting.filter((layer) => estimate(model, layer) <= FIT_MARGIN * deadline);
  const pool = comfortable.length > 0 ? comfortable : fitting;
  const best = pool.reduce((chosen, layer) => (estimate(model, layer) >= estimate(model, chosen) ? layer : chosen), pool[0]);
  if (best === undefined) {
    return 'no layer of this model fits; fewer channels (scorecam_channels in the API) or a longer limit (CAMSERVE_REQUEST_TIMEOUT_S on the server) would';
  }
  return `choose layer ${best} (about ${roughTime(estimate(model, best))}), or fewer channels (scorecam_channels in the API)`;
}
