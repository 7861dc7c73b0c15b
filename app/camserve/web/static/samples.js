// The sample images the server ships (listed at /static/samples.json), offered as buttons in
// their groups and loaded as files, so the page treats a sample exactly like an image the user
// chose.

const SAMPLES_URL = '/static/samples.json';
/** The heading of the samples in no group, shown only when other samples have a group. */
const UNGROUPED = 'More';

/** [{name, url, bytes, group}, ...] in the server's order; [] when it offers none. */
export async function listSamples() {
  const response = await fetch(SAMPLES_URL);
  if (!response.ok) throw new Error(`samples: HTTP ${response.status}`);
  const { samples } = await response.json();
  return Array.isArray(samples) ? samples : [];
}

/** The sample's image as a File named like its URL's last part. */
export async function sampleFile(sample) {
  const response = await fetch(sample.url);
  if (!response.ok) throw new Error(`The sample ${sample.name} could not be loaded (HTTP ${response.status}).`);
  const blob = await response.blob();
  const name = decodeURIComponent(sample.url.split('/').pop());
  return new File([blob], name, { type: blob.type });
}

/**
 * Fill `list` with the samples, a headed block per group in the server's order; a click hands
 * the sample to `onChoose`.
 */
export function showSamples(list, samples, onChoose) {
  const groups = groupSamples(samples);
  const headed = groups.some(({ title }) => title !== null);
  list.replaceChildren(
    ...groups.map(({ title, members }) => sampleGroup(headed ? (title ?? UNGROUPED) : null, members, onChoose)),
  );
}

/** [{title, members}] in order of first appearance; `title` is null for the ungrouped. */
function groupSamples(samples) {
  const groups = new Map();
  for (const sample of samples) {
    const title = typeof sample.group === 'string' && sample.group !== '' ? sample.group : null;
    if (!groups.has(title)) groups.set(title, { title, members: [] });
    groups.get(title).members.push(sample);
  }
  return [...groups.values()];
}

function sampleGroup(title, members, onChoose) {
  const group = document.createElement('div');
  group.className = 'sample-group';
  const grid = document.createElement('div');
  grid.className = 'sample-grid';
  grid.append(...members.map((sample) => sampleButton(sample, onChoose)));
  if (title !== null) {
    const heading = document.createElement('h3');
    heading.className = 'sample-group-title';
    heading.textContent = title.charAt(0).toUpperCase() + title.slice(1);
    group.append(heading);
  }
  group.append(grid);
  return group;
}

function sampleButton(sample, onChoose) {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'sample';
  button.dataset.sample = sample.url;
  const thumbnail = document.createElement('img');
  thumbnail.src = sample.url;
  thumbnail.alt = '';
  const name = document.createElement('span');
  name.className = 'sample-name';
  name.textContent = sample.name;
  button.append(thumbnail, name);
  button.addEventListener('click', () => onChoose(sample));
  return button;
}

/** Mark the sample whose URL is `url` as the one shown (none when `url` is null). */
export function markChosenSample(list, url) {
  for (const button of list.querySelectorAll('.sample')) {
    if (button.dataset.sample === url) button.setAttribute('aria-current', 'true');
    else button.removeAttribute('aria-current');
  }
}
