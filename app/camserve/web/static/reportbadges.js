// The explanation report beside the method checkboxes. At the chosen layer, each method the
// report covers gets two badges: whether its maps pass the sanity check (they must change when
// the model's weights are randomised) and its rank on faithfulness (ROAD, higher is better)
// among the methods at that layer. A note under the boxes says what the badges are and links to
// the report, or says how far the report has come while the server computes it. Badges are
// words (✓ / ✗ and "sanity"), their numbers in a tooltip; colour only repeats them.

import { methodName } from './cards.js';

/** A layer's rows ranked by ROAD: ties (equal to the three decimals shown) share a rank. */
export function faithfulnessRanks(rows) {
  const scores = rows.map((row) => Number(row.faithfulness.road.toFixed(3)));
  return new Map(rows.map((row, index) => [row.method, 1 + scores.filter((score) => score > scores[index]).length]));
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
  const ranks = faithfulnessRanks(rows);
  for (const row of rows) {
    const label = list.querySelector(`input[value="${CSS.escape(row.method)}"]`)?.closest('label');
    if (!label) continue;
    const badges = element('span', 'report-badges');
    badges.append(sanityBadge(row, rule), rankBadge(row, ranks.get(row.method), rows.length));
    label.append(badges);
  }
}

function sanityBadge(row, rule) {
  const { passed, spearman, steps, decisive_step: step } = row.sanity;
  const badge = element('span', `badge sanity ${passed ? 'pass' : 'fail'}`);
  badge.dataset.passed = String(passed);
  const mark = element('span', '', passed ? '✓' : '✗');
  mark.setAttribute('aria-hidden', 'true');
  const outcome = element('span', 'visually-hidden', passed ? ' check passed' : ' check failed');
  badge.append(mark, ' sanity', outcome);
  badge.title =
    `${passed ? 'Passes' : 'Fails'} the sanity check: once the weights down to ${steps[step]} are ` +
    `randomised, ${methodName(row.method)}'s maps keep a mean Spearman correlation of ` +
    `${spearman[step].toFixed(2)} with the trained model's. The rule: it ${rule}.`;
  return badge;
}

function rankBadge(row, rank, count) {
  const { road, deletion_auc: deletion, insertion_auc: insertion } = row.faithfulness;
  const badge = element('span', 'badge rank');
  badge.dataset.rank = String(rank);
  const shown = element('span', '', `#${rank}/${count} faithful`);
  shown.setAttribute('aria-hidden', 'true');
  badge.append(shown, element('span', 'visually-hidden', `faithfulness rank ${rank} of ${count}`));
  badge.title =
    `Faithfulness at ${row.layer}: ROAD ${road.toFixed(3)} (higher is more faithful), ` +
    `rank ${rank} of the ${count} methods here (equal scores share a rank); deletion AUC ` +
    `${deletion.toFixed(3)} (lower is better), insertion AUC ${insertion.toFixed(3)} (higher is better).`;
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
