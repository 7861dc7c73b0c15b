// The sample images the server ships (listed at /static/samples.json), loaded as files so the
// page treats a sample exactly like an image the user chose.

const SAMPLES_URL = '/static/samples.json';

/** [{name, url, bytes}, ...] in the server's order; [] when it offers none. */
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
