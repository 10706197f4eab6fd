/**
 * A filter field inside each ref switcher (it exists only when this script runs): typing hides
 * the refs whose names do not contain the text.
 */
let seq = 0;
for (const box of document.querySelectorAll<HTMLDetailsElement>('details[data-refs]')) {
  const menu = box.querySelector<HTMLElement>('.ref-menu');
  if (menu === null) continue;
  const id = `ref-filter-${seq++}`;
  const wrap = document.createElement('div');
  wrap.className = 'ref-filter';
  const label = document.createElement('label');
  label.htmlFor = id;
  label.className = 'visually-hidden';
  label.textContent = 'Filter branches and tags';
  const input = document.createElement('input');
  input.type = 'search';
  input.id = id;
  input.placeholder = 'Filter branches and tags';
  input.autocomplete = 'off';
  wrap.append(label, input);
  menu.prepend(wrap);
  input.addEventListener('input', () => {
    const q = input.value.trim().toLowerCase();
    for (const li of menu.querySelectorAll<HTMLLIElement>('.ref-list li')) {
      const a = li.querySelector('a');
      if (a === null) continue;
      li.hidden = q !== '' && !(a.textContent ?? '').toLowerCase().includes(q);
    }
  });
  box.addEventListener('toggle', () => {
    if (box.open) input.focus();
  });
  document.addEventListener('click', (e) => {
    if (box.open && !box.contains(e.target as Node)) box.open = false;
  });
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && box.open) {
      box.open = false;
      box.querySelector('summary')?.focus();
    }
  });
}
