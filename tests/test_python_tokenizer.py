"""pagellm.get_tokenizer / LLM.get_tokenizer / LLM.chat against independent references: the
sentencepiece Python package for ids and text, and jinja2 for chat templates (rendered as
transformers renders them)."""

import os

import pytest

TEXTS = ["Once upon a time", "Lily's mom said: \"No!\"\n", "ünïcödé ✓ 日本", "", "  two  spaces"]

TEMPLATE = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
            "{% if not loop.last %}\n{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}\n<assistant>{% endif %}")


def test_encode_decode_match_sentencepiece(pagellm_module, stories_model):
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(stories_model, "tokenizer.model"))
    tok = pagellm_module.get_tokenizer(stories_model)
    assert tok.vocab_size == len(tok) == sp.get_piece_size()
    assert tok.bos_token_id == sp.bos_id() and tok.eos_token_id == sp.eos_id()
    for text in TEXTS:
        ids = sp.encode(text)
        assert tok.encode(text, add_special_tokens=False) == ids
        assert tok.encode(text) == [sp.bos_id()] + ids  # add_bos_token in tokenizer_config
        assert tok.decode(ids) == sp.decode(ids)
        assert tok.decode([sp.bos_id()] + ids, skip_special_tokens=True) == sp.decode(ids)
    assert tok.convert_ids_to_tokens([403, 407]) == [sp.id_to_piece(403), sp.id_to_piece(407)]
    assert tok.convert_tokens_to_ids(sp.id_to_piece(407)) == 407


def test_apply_chat_template_matches_jinja2_and_llm_chat_uses_it(pagellm_module,
                                                                  stories_model):
    jinja2 = pytest.importorskip("jinja2")
    llm = pagellm_module.LLM(model=stories_model)
    tok = llm.get_tokenizer()
    assert tok.chat_template is None  # stories260K has none: it must be given
    conversation = [{"role": "system", "content": "Tell stories."},
                    {"role": "user", "content": "A story about a cat"}]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    for add in (False, True):
        expected = env.from_string(TEMPLATE).render(messages=conversation,
                                                    add_generation_prompt=add,
                                                    bos_token=tok.bos_token)
        text = tok.apply_chat_template(conversation, chat_template=TEMPLATE,
                                       add_generation_prompt=add, tokenize=False)
        assert text == expected
        ids = tok.apply_chat_template(conversation, chat_template=TEMPLATE,
                                      add_generation_prompt=add)
        assert ids == tok.encode(expected, add_special_tokens=False)
    greedy = pagellm_module.SamplingParams(temperature=0.0, max_tokens=12)
    chat = llm.chat(conversation, greedy, chat_template=TEMPLATE, use_tqdm=False)
    prompt = tok.apply_chat_template(conversation, chat_template=TEMPLATE,
                                     add_generation_prompt=True, tokenize=False)
    direct = llm.generate({"prompt_token_ids": tok.encode(prompt, add_special_tokens=False)},
                          greedy, use_tqdm=False)
    assert chat[0].prompt == prompt
    assert chat[0].prompt_token_ids == direct[0].prompt_token_ids
    assert chat[0].outputs[0].token_ids == direct[0].outputs[0].token_ids
    # vLLM's content formats: "openai" hands the template a list of parts, "string" the text.
    parts = [{"role": "user", "content": [{"type": "text", "text": "A"},
                                          {"type": "text", "text": "B"}]}]
    loop = ("{% for m in messages %}{% for p in m['content'] %}[{{ p['text'] }}]{% endfor %}"
            "{% endfor %}")
    assert tok.apply_chat_template(parts, chat_template=loop, tokenize=False,
                                   chat_template_content_format="openai") == "[A][B]"
    assert tok.apply_chat_template(parts, chat_template="{{ messages[0]['content'] }}",
                                   tokenize=False,
                                   chat_template_content_format="string") == "A\nB"
    # A batch of conversations.
    batch = llm.chat([conversation, conversation[1:]], greedy, chat_template=TEMPLATE,
                     use_tqdm=False)
    assert len(batch) == 2 and batch[0].outputs[0].token_ids == chat[0].outputs[0].token_ids
