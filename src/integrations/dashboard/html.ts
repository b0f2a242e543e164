/**
 * HTML that is safe to write as is: built only by the `html` tag below, which escapes every value
 * it interpolates unless that value is itself `Html`. Job names, replica names and error texts come
 * from the database and may be anything (`<img src=x onerror=alert(1)>`): they only ever reach a
 * page through this tag.
 */
export class Html {
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  toString(): string {
    return this.#text;
  }
}

/** What the `html` tag accepts: text is escaped, `Html` kept, arrays joined, null/undefined/false dropped. */
export type HtmlValue = Html | string | number | null | undefined | false | readonly HtmlValue[];

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for an element's content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ENTITIES[character] ?? character);
}

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.toString();
  if (Array.isArray(value)) return (value as readonly HtmlValue[]).map(render).join('');
  return escapeHtml(String(value));
}

/** The template tag every page is written with: interpolations are escaped. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, index) => {
    out += render(value) + (strings[index + 1] ?? '');
  });
  return new Html(out);
}

/**
 * A query value of a link: any job name or id, percent-encoded (then escaped by `html`). Names go in
 * the query, never the path, where a browser would resolve a job named '..' as a parent folder.
 */
export function segment(value: string): string {
  return encodeURIComponent(value);
}
