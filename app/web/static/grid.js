// Several explanations as a labelled grid: a column per method (headed by its name), a row per
// class (headed by its label and probability). Empty cells keep the columns aligned while a
// class still lacks a method.

import { percent } from './cards.js';

export class ResultsGrid {
  /** `methodNames` head the columns; each row is {prediction: {index, label, probability}, cards}. */
  constructor(methodNames, rows) {
    this.element = document.createElement('div');
    this.element.className = 'grid';
    this.element.setAttribute('role', 'table');
    this.element.setAttribute('aria-label', 'Heatmaps by class (rows) and method (columns)');
    this.element.style.setProperty('--methods', String(methodNames.length));
    this.element.append(headerRow(methodNames), ...rows.map(classRow));
  }
}

function headerRow(methodNames) {
  const row = part('div', 'grid-row grid-header', 'row');
  row.append(part('div', 'grid-corner', 'columnheader'));
  for (const name of methodNames) {
    const head = part('div', 'grid-column-head', 'columnheader');
    head.textContent = name;
    row.append(head);
  }
  return row;
}

function classRow({ prediction, cards }) {
  const row = part('div', 'grid-row', 'row');
  const head = part('div', 'grid-row-head', 'rowheader');
  const label = document.createElement('span');
  label.className = 'grid-label';
  label.textContent = prediction?.label ?? '';
  const probability = document.createElement('span');
  probability.className = 'probability';
  probability.textContent = prediction ? percent(prediction.probability) : '';
  head.append(label, ' ', probability);
  row.append(head);
  for (const card of cards) {
    const cell = part('div', 'grid-cell', 'cell');
    if (card) cell.append(card.element);
    row.append(cell);
  }
  return row;
}

function part(tag, className, role) {
  const element = document.createElement(tag);
  element.className = className;
  element.setAttribute('role', role);
  return element;
}
