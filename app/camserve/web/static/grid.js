// Several explanations as a labelled grid: a column per method (headed by its name), a row per
// class (headed by its label and probability). Empty cells keep the columns aligned while a
// class still lacks a method. A class-agnostic method's column holds one card, in the first row,
// spanning every row: its map is the same for every class.

import { percent } from './cards.js';

export class ResultsGrid {
  /**
   * `methodNames` head the columns; each row is {prediction: {index, label, probability}, cards}
   * (a card, or null for an empty cell); `shared` holds the columns of class-agnostic methods,
   * whose card is the first row's.
   */
  constructor(methodNames, rows, shared = new Set()) {
    this.element = document.createElement('div');
    this.element.className = 'grid';
    this.element.setAttribute('role', 'table');
    this.element.setAttribute('aria-label', 'Heatmaps by class (rows) and method (columns)');
    this.element.style.setProperty('--methods', String(methodNames.length));
    const span = rows.length;
    this.element.append(headerRow(methodNames), ...rows.map((row, rank) => classRow(row, rank, shared, span)));
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

function classRow({ prediction, cards }, rank, shared, span) {
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
  cards.forEach((card, column) => {
    if (!shared.has(column)) {
      row.append(cell(card));
    } else if (rank === 0) {
      const spanning = cell(card);
      spanning.classList.add('shared');
      spanning.style.setProperty('--rows', String(span));
      row.append(spanning);
    }
  });
  return row;
}

function cell(card) {
  const element = part('div', 'grid-cell', 'cell');
  if (card) element.append(card.element);
  return element;
}

function part(tag, className, role) {
  const element = document.createElement(tag);
  element.className = className;
  element.setAttribute('role', role);
  return element;
}
