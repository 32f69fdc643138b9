// The event-type checkboxes of the webhook subscription and notification target forms, loaded from an API's
// event catalogue route.
import { ErrorBox, useLoad } from './ui';
import { request } from '../api/client';

export function EventChecklist({ catalogue, selected, onChange }: { catalogue: string; selected: string[]; onChange(events: string[]): void }) {
  const events = useLoad(() => request<{ data: Array<{ type: string; description: string }> }>('GET', catalogue), [catalogue]);
  const toggle = (type: string) => onChange(selected.includes(type) ? selected.filter((t) => t !== type) : [...selected, type]);
  return (
    <fieldset>
      <legend>Events</legend>
      <ErrorBox error={events.error} />
      {events.data?.data.map((ev) => (
        <label key={ev.type} className="check" title={ev.description}>
          <input type="checkbox" checked={selected.includes(ev.type)} onChange={() => toggle(ev.type)} /> {ev.type}
        </label>
      ))}
    </fieldset>
  );
}
