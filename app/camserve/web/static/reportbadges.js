// The explanation report beside the method checkboxes. At the chosen layer, each method the
// report covers gets two badges: its sanity verdict (its maps must change when the model's
// weights are randomised: passed, failed, or undecided where the seeds of the random weights
// disagree) and its rank on faithfulness (ROAD, higher is better) among the methods at that
// layer, as the report ranks them: a range ("tied #1-3/6") where the images do not separate
// the scores. A note under the boxes says what the badges are and links to the report, or says
// how far the report has come while the server computes it. Badges are words (✓ / ✗ / ? and
// "sanity"), their numbers in a tooltip; colour only repeats them.

import { methodName } from './cards.js';

const VERDICTS = {
  pass: { mark: '✓', spoken: ' check passed', says: 'Passes' },
  fail: { mark: '✗', spoken: ' check failed', says: 'Fails' },
  undecided: { mark: '?', spoken: ' check undecided', says: 'Is undecided on' },
};

/** The rank's words: "#2/6" where the report separates it, "tied #1-3/6" where not. */
export function rankWords({ best, worst, of }) {
  return best === worst ? `#${best}/${of}` : `tied #${best}-${worst}/${of}`;
}

/**
 * Show `body` (GET /v1/models/{name}/report's answer, or null) for `layer`: badges inside the
 * labels of `list`'s checkboxes, and the `note` under them.
 */
export function showReport(list, note, body, layer) {
  for (const old of list.querySelectorAll('.report-badges')) old.remove();
  const report = body?.state === 'ready' ? body.report : null;
  const rows = report?.rows.filter((row) => row.layer === layer) ?? [];
  if (rows.length > 0) addBadges(list, rows, report.sanity_rule);
  showNote(note, body, layer, rows.length > 0);
}

function addBadges(list, rows, rule) {
  for (const row of rows) {
    const label = list.querySelector(`input[value="${CSS.escape(row.method)}"]`)?.closest('label');
    if (!label) continue;
    const badges = element('span', 'report-badges');
    badges.append(sanityBadge(row, rule), rankBadge(row));
    label.append(badges);
  }
}

function sanityBadge(row, rule) {
  const { passed, verdict, decisive_range: range, seeds, steps, decisive_step: step, images } = row.sanity;
  const words = VERDICTS[verdict];
  const badge = element('span', `badge sanity ${verdict}`);
  badge.dataset.passed = String(passed);
  badge.dataset.verdict = verdict;
  const mark = element('span', '', words.mark);
  mark.setAttribute('aria-hidden', 'true');
  badge.append(mark, ' sanity', element('span', 'visually-hidden', words.spoken));
  const [low, high] = range.map((value) => value.toFixed(2));
  const kept = low === high ? low : `${low} to ${high}`;
  badge.title =
    `${words.says} the sanity check: once the weights down to ${steps[step]} are randomised ` +
    `(${seeds.length} seeds), ${methodName(row.method)}'s maps keep a mean ` +
    `${row.sanity.sign_free ? 'absolute ' : ''}Spearman correlation of ${kept} with the trained ` +
    `model's, over ${images} images. The rule: it ${rule}.`;
  return badge;
}

function rankBadge(row) {
  const { road, road_interval: interval, rank, images } = row.faithfulness;
  const { deletion_auc: deletion, insertion_auc: insertion } = row.faithfulness;
  const badge = element('span', `badge rank${rank.best === rank.worst ? '' : ' tied'}`);
  badge.dataset.rank = rank.best === rank.worst ? String(rank.best) : `${rank.best}-${rank.worst}`;
  const shown = element('span', '', `${rankWords(rank)} faithful`);
  shown.setAttribute('aria-hidden', 'true');
  const spoken =
    rank.best === rank.worst
      ? `faithfulness rank ${rank.best} of ${rank.of}`
      : `faithfulness rank ${rank.best} to ${rank.worst} of ${rank.of}, tied`;
  badge.append(shown, element('span', 'visually-hidden', spoken));
  const spread = interval
    ? `95 % interval ${interval[0].toFixed(3)} to ${interval[1].toFixed(3)}`
    : 'too few images for an interval';
  const place =
    rank.best === rank.worst
      ? `rank ${rank.best} of the ${rank.of} methods here`
      : `rank ${rank.best} to ${rank.worst} of the ${rank.of} methods here (the images do not separate them)`;
  badge.title =
    `Faithfulness at ${row.layer} over ${images} images: ROAD ${road.toFixed(3)} (${spread}; ` +
    `higher is more faithful), ${place}; deletion AUC ${deletion.toFixed(3)} (lower is better), ` +
    `insertion AUC ${insertion.toFixed(3)} (higher is better).`;
  return badge;
}

/** The quiet line under the boxes; hidden when there is no report to speak of. */
function showNote(note, body, layer, covered) {
  const words = noteWords(body, layer, covered);
  note.hidden = words === null;
  note.replaceChildren(...(words ?? []));
  if (words) note.dataset.state = body.state;
}

/** What the note says of `body` (text and the report's link), or null for nothing. */
function noteWords(body, layer, covered) {
  switch (body?.state) {
    case 'queued':
      return ['Explanation report: queued.'];
    case 'running':
      return [`Explanation report: computing (${Math.round(100 * body.progress)} %).`];
    case 'failed':
      return ['The ', reportLink(body.model), ' could not be computed.'];
    case 'ready':
      return covered
        ? [`Sanity check and faithfulness rank at ${layer}, from the `, reportLink(body.model), '.']
        : ['The ', reportLink(body.model), ` covers the layers ${reportLayers(body.report).join(', ')}.`];
    default:
      return null; // unsupported (a bare engine), reports off, or not known yet
  }
}

function reportLayers(report) {
  return [...new Set(report.rows.map((row) => row.layer))];
}

function reportLink(model) {
  const link = element('a', 'report-link', 'explanation report');
  link.href = `/v1/models/${encodeURIComponent(model)}/report`;
  link.target = '_blank';
  link.rel = 'noopener';
  link.append(element('span', 'visually-hidden', ' (JSON, opens in a new tab)'));
  return link;
}

function element(tag, className, text = '') {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}
