# nerd-dictation user configuration that ends every finalized phrase with a line break, so that
# `nerd-dictation begin --output STDOUT` produces one line per phrase, which `speakbridge send` turns into one chunk.
#
#   nerd-dictation begin --output STDOUT --continuous --config Examples/sources/nerd_dictation_lines.py \
#       | speakbridge send


def nerd_dictation_process(text):
    text = text.strip()
    return text + "\n" if text else ""
