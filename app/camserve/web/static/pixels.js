// Pixels in the browser: decoding images to RGBA arrays and blending a colormapped heatmap over
// the original exactly as the server does, so the opacity and the colormap change without a
// new request.

// Decode the stored values as they are: no colour-profile conversion, no premultiplied alpha,
// EXIF orientation applied (the server applies it too).
const DECODE_OPTIONS = {
  imageOrientation: 'from-image',
  colorSpaceConversion: 'none',
  premultiplyAlpha: 'none',
};

/** The server's colormaps: {name: Uint8Array of 256 × [r, g, b]}. */
export async function loadColormaps(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`colormaps: HTTP ${response.status}`);
  const tables = await response.json();
  return Object.fromEntries(
    Object.entries(tables).map(([name, rows]) => [name, Uint8Array.from(rows.flat())]),
  );
}

/** An image Blob as ImageData, transparent pixels composited over white as the server does. */
export async function decodeImage(blob) {
  const bitmap = await createImageBitmap(blob, DECODE_OPTIONS);
  try {
    const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
    const context = canvas.getContext('2d', { willReadFrequently: true });
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, bitmap.width, bitmap.height);
    context.drawImage(bitmap, 0, 0);
    return context.getImageData(0, 0, bitmap.width, bitmap.height);
  } finally {
    bitmap.close();
  }
}

/** The bytes of base64 `text` as a Blob of `type`. */
export function blobFromBase64(text, type) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return new Blob([bytes], { type });
}

/** A base64 8-bit grayscale PNG as {width, height, values: Uint8Array (one byte per pixel)}. */
export async function decodeHeatmap(base64) {
  const image = await decodeImage(blobFromBase64(base64, 'image/png'));
  const values = new Uint8Array(image.width * image.height);
  for (let p = 0; p < values.length; p += 1) values[p] = image.data[4 * p];
  return { width: image.width, height: image.height, values };
}

/**
 * The overlay of `heatmap` over `original` (ImageData of the same size) with colormap `lut`
 * at opacity `alpha`: round(alpha · lut[h] + (1 − alpha) · original) per channel.
 */
export function blend(original, heatmap, lut, alpha) {
  const mix = mixTable(alpha);
  const source = original.data;
  const out = new ImageData(original.width, original.height);
  const target = out.data;
  for (let p = 0, i = 0; p < heatmap.values.length; p += 1, i += 4) {
    const color = 3 * heatmap.values[p];
    target[i] = mix[(lut[color] << 8) | source[i]];
    target[i + 1] = mix[(lut[color + 1] << 8) | source[i + 1]];
    target[i + 2] = mix[(lut[color + 2] << 8) | source[i + 2]];
    target[i + 3] = 255;
  }
  return out;
}

/**
 * Every blend of a colormap value c with an original value v, at index c · 256 + v. The server
 * blends in 32-bit floats and rounds halves to even; Math.fround and roundHalfEven repeat that,
 * so the page's pixels equal the server's overlay.
 */
function mixTable(alpha) {
  const weight = Math.fround(alpha);
  const rest = Math.fround(1 - alpha);
  const table = new Uint8ClampedArray(256 * 256);
  for (let c = 0; c < 256; c += 1) {
    const colored = Math.fround(c * weight);
    for (let v = 0; v < 256; v += 1) {
      table[(c << 8) | v] = roundHalfEven(Math.fround(colored + Math.fround(v * rest)));
    }
  }
  return table;
}

function roundHalfEven(value) {
  const floor = Math.floor(value);
  const fraction = value - floor;
  if (fraction !== 0.5) return Math.round(value);
  return floor % 2 === 0 ? floor : floor + 1;
}
