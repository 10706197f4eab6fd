/**
 * The access tokens page: the target field is shown only for the organization and repository
 * reaches (and is then required); without this script it is always shown and the server checks
 * it. After a token was made, the page's history entry is replaced, so reloading it asks for the
 * list again instead of sending the form a second time.
 */
const level = document.querySelector<HTMLSelectElement>('select[name="level"]');
const box = document.querySelector<HTMLElement>('[data-token-target]');
const target = box?.querySelector<HTMLInputElement>('input[name="target"]');
if (level !== null && box !== null && target !== null && target !== undefined) {
  const sync = () => {
    const personal = level.value === 'personal';
    box.hidden = personal;
    target.disabled = personal;
    target.required = !personal;
  };
  level.addEventListener('change', sync);
  sync();
}
if (document.querySelector('[data-shown-once]') !== null) {
  history.replaceState(null, '', location.href);
}
