// A segmenter's answer on the page: each predicted class's mask, coloured per class, as a layer
// over every card that the "Show the masks" checkbox shows and hides (no request, no repaint),
// and a legend naming each colour's class and its share of the image. The background (class 0,
// as torchvision's segmenters and camserve's own number it) is left clear on the layer and out
// of the legend: coloured, it would veil the whole picture.

import { percent } from './cards.js';
import { decodeImage, blobFromBase64 } from './pixels.js';

const GOLDEN_ANGLE = 137.508; // degrees: neighbouring class indices get far-apart hues

/** Whether class `classIndex` of a segmenter is its background. */
export function isBackground(classIndex) {
  return classIndex === 0;
}

function foreground(segments) {
  return segments.filter((segment) => !isBackground(segment.class_index));
}

/** The colour of class `classIndex`, [r, g, b]: the same on the masks, the legend and the boxes. */
export function classColor(classIndex) {
  const hue = (classIndex * GOLDEN_ANGLE + 200) % 360;
  return hslToRgb(hue, 0.75, 0.5);
}

/** `classColor` as a CSS colour. */
export function cssColor(classIndex) {
  const [r, g, b] = classColor(classIndex);
  return `rgb(${r} ${g} ${b})`;
}

function hslToRgb(hue, saturation, lightness) {
  const chroma = (1 - Math.abs(2 * lightness - 1)) * saturation;
  const channel = (n) => {
    const k = (n + hue / 30) % 12;
    const value = lightness - chroma / 2 * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(255 * value);
  };
  return [channel(0), channel(8), channel(4)];
}

/**
 * One ImageData of every segment's mask but the background's (base64 PNGs at the image's size,
 * 255 inside): each pixel in its class's colour, opaque inside a mask and transparent outside
 * every mask.
 */
export async function maskImage(segments, size) {
  const image = new ImageData(size.width, size.height);
  const shown = foreground(segments);
  const masks = await Promise.all(
    shown.map((segment) => decodeImage(blobFromBase64(segment.mask, 'image/png'))),
  );
  masks.forEach((mask, rank) => {
    const [r, g, b] = classColor(shown[rank].class_index);
    for (let i = 0; i < image.data.length; i += 4) {
      if (mask.data[i] < 128) continue;
      image.data.set([r, g, b, 255], i);
    }
  });
  return image;
}

/** A canvas of `image` laid over `stage` (its card's picture), shown only when `visible`. */
export function addMaskLayer(stage, image, visible) {
  const layer = document.createElement('canvas');
  layer.className = 'mask-layer';
  layer.width = image.width;
  layer.height = image.height;
  layer.getContext('2d').putImageData(image, 0, 0);
  layer.hidden = !visible;
  layer.setAttribute('aria-hidden', 'true');
  stage.append(layer);
}

/** Show or hide every mask layer on the page. */
export function showMaskLayers(root, visible) {
  for (const layer of root.querySelectorAll('.mask-layer')) layer.hidden = !visible;
}

/** The legend: a colour swatch, the class's label and its share of the image, largest first
 * (the background left out). */
export function showLegend(list, segments) {
  list.replaceChildren(
    ...foreground(segments).map((segment) => {
      const item = document.createElement('li');
      item.className = 'legend-item';
      item.dataset.classIndex = String(segment.class_index);
      const swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.backgroundColor = cssColor(segment.class_index);
      const share = document.createElement('span');
      share.className = 'probability';
      share.textContent = percent(segment.fraction);
      item.append(swatch, ` ${segment.label} `, share);
      return item;
    }),
  );
}
