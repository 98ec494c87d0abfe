# Lists the sandbox's working directory after the code ran, as one JSON
# object on stdout: {"files": [{"name", "size", "content"?}], "truncated"}.
# Arguments: most files, largest file whose text is included, most text in all.
import json, os, stat, sys

max_count, max_content, max_total = (int(a) for a in sys.argv[1:4])
files, truncated, total = [], False, 0


def text_of(path, size):
    if size > max_content or total + size > max_total:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_content + 1)
        return data.decode("utf-8") if len(data) <= max_content else None
    except (OSError, UnicodeDecodeError):
        return None


for root, dirs, names in os.walk("."):
    dirs.sort()
    for name in sorted(names):
        if len(files) >= max_count:
            truncated = True
            break
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        shown = path[2:].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        entry = {"name": shown, "size": info.st_size}
        if stat.S_ISREG(info.st_mode):
            content = text_of(path, info.st_size)
            if content is not None:
                entry["content"] = content
                total += len(content.encode("utf-8"))
        files.append(entry)
    if truncated:
        break
json.dump({"files": files, "truncated": truncated}, sys.stdout)
