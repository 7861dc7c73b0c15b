// A detector's boxes on the page: each card's picture sits on a stage, with the detections' boxes
// laid over it as outlines tagged "label score"; a click on the picture chooses the smallest box
// under the pointer, and the list of detections (one button each) chooses from the keyboard.

import { percent } from './cards.js';
import { cssColor } from './segments.js';

/**
 * Put `card`'s canvas on a stage shaped like the image ({width, height}), so that layers laid
 * over it (boxes, masks) meet the picture's pixels; the stage, to lay them on.
 */
export function stageOf(card, size) {
  const stage = document.createElement('div');
  stage.className = 'stage';
  stage.style.setProperty('--ratio', String(size.width / size.height));
  card.canvas.replaceWith(stage);
  stage.append(card.canvas);
  return stage;
}

/** Lay `detections` over `stage` as tagged outlines, `selected` on top; clicks call onSelect. */
export function drawDetections(stage, detections, size, selected, onSelect) {
  const layer = document.createElement('div');
  layer.className = 'box-layer';
  const ordered = [
    ...detections.filter((detection) => detection.index !== selected),
    ...detections.filter((detection) => detection.index === selected),
  ];
  layer.append(...ordered.map((detection) => boxElement(detection, size, detection.index === selected)));
  stage.append(layer);
  stage.classList.add('pickable');
  stage.addEventListener('click', (event) => {
    const bounds = stage.getBoundingClientRect();
    const x = ((event.clientX - bounds.left) / bounds.width) * size.width;
    const y = ((event.clientY - bounds.top) / bounds.height) * size.height;
    const picked = smallestAround(detections, x, y);
    if (picked) onSelect(picked.index);
  });
}

function boxElement(detection, size, isSelected) {
  const box = document.createElement('div');
  box.className = isSelected ? 'detection-box selected' : 'detection-box';
  box.dataset.index = String(detection.index);
  box.style.left = share(detection.x0, size.width);
  box.style.top = share(detection.y0, size.height);
  box.style.width = share(detection.x1 - detection.x0, size.width);
  box.style.height = share(detection.y1 - detection.y0, size.height);
  box.style.setProperty('--box-color', cssColor(detection.class_index));
  const tag = document.createElement('span');
  tag.className = 'box-tag';
  tag.textContent = `${detection.label} ${percent(detection.score)}`;
  // The tag sits above the box, or inside it for a box at the image's top; it runs leftwards
  // from the box's right edge for a box in the image's right half, so it stays on the picture.
  if (detection.y0 < 0.12 * size.height) tag.classList.add('inside');
  if (detection.x0 > size.width / 2) tag.classList.add('from-right');
  box.append(tag);
  return box;
}

function share(length, whole) {
  return `${(100 * length) / whole}%`;
}

/** The smallest of `detections` whose box holds the point (x, y), or undefined. */
function smallestAround(detections, x, y) {
  const around = detections.filter(({ x0, y0, x1, y1 }) => x >= x0 && x < x1 && y >= y0 && y < y1);
  const area = ({ x0, y0, x1, y1 }) => (x1 - x0) * (y1 - y0);
  return around.sort((first, second) => area(first) - area(second))[0];
}

/** One button per detection, the chosen one pressed; pressing one calls onSelect(index). */
export function listDetections(list, detections, selected, onSelect) {
  list.replaceChildren(
    ...detections.map((detection) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'detection-choice';
      button.dataset.index = String(detection.index);
      button.setAttribute('aria-pressed', String(detection.index === selected));
      const swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.backgroundColor = cssColor(detection.class_index);
      const score = document.createElement('span');
      score.className = 'probability';
      score.textContent = percent(detection.score);
      button.append(swatch, ` ${detection.index + 1}. ${detection.label} `, score);
      button.addEventListener('click', () => onSelect(detection.index));
      return button;
    }),
  );
}
